package abacus

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents/internal/tooltest"
	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// serve registers abacus on a fresh server and connects a client to it
// through in-memory transports.
func serve(t *testing.T) *mcp.ClientSession {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "abacus", Version: "test"}, nil)
	if err := Register(server); err != nil {
		t.Fatal(err)
	}
	cs, _ := tooltest.Connect(t, server)
	return cs
}

func TestToolsList(t *testing.T) {
	cs := serve(t)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]map[string]any{}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		var m map[string]any
		json.Unmarshal(b, &m)
		schemas[tool.Name] = m
		if tool.Description == "" || tool.OutputSchema == nil {
			t.Errorf("tool %s: description %q, output schema %v", tool.Name, tool.Description, tool.OutputSchema)
		}
	}
	slices.Sort(names)
	if want := []string{"calculate", "convert_units", "date_math"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	op := schemas["date_math"]["properties"].(map[string]any)["operation"].(map[string]any)
	if !slices.Equal(op["enum"].([]any), []any{"add", "subtract", "between", "weekday"}) {
		t.Errorf("date_math operation enum = %v", op["enum"])
	}
	if r := schemas["convert_units"]["required"].([]any); !slices.Equal(r, []any{"value", "from", "to"}) {
		t.Errorf("convert_units required = %v", r)
	}
}

func TestToolCalculate(t *testing.T) {
	cs := serve(t)
	var out calculateOut
	res := tooltest.Call(t, cs, "calculate", map[string]any{"expression": "2 + 3 * 4"}, &out)
	if res.IsError || out.Result != 14 || mcptest.Text(res) != "2 + 3 * 4 = 14" {
		t.Fatalf("calculate = %q %+v", mcptest.Text(res), out)
	}
	res = tooltest.Call(t, cs, "calculate", map[string]any{"expression": "0.1 + 0.2"}, &out)
	if res.IsError || out.Result != 0.3 || mcptest.Text(res) != "0.1 + 0.2 = 0.3" {
		t.Fatalf("calculate = %q %+v", mcptest.Text(res), out)
	}

	tests := []struct {
		expr string
		want string
	}{
		{"1 / (2 - 2)", "division by zero at position 3\n  1 / (2 - 2)\n    ^"},
		{"2 * (3 + 4", "expected \")\" to close the \"(\" at position 5, found end of input at position 11\n  2 * (3 + 4\n            ^"},
		{"sqrt(-1)", "sqrt: square root of a negative number (-1) at position 1\n  sqrt(-1)\n  ^"},
	}
	for _, tt := range tests {
		res := tooltest.Call(t, cs, "calculate", map[string]any{"expression": tt.expr}, nil)
		if !res.IsError || mcptest.Text(res) != tt.want {
			t.Errorf("calculate(%q) = isError %v, %q; want a tool error %q", tt.expr, res.IsError, mcptest.Text(res), tt.want)
		}
	}
	if res := tooltest.Call(t, cs, "calculate", map[string]any{}, nil); !res.IsError || !strings.Contains(mcptest.Text(res), "expression") {
		t.Errorf("calculate without expression = %q", mcptest.Text(res))
	}
}

func TestToolConvertUnits(t *testing.T) {
	cs := serve(t)
	var out convertOut
	res := tooltest.Call(t, cs, "convert_units", map[string]any{"value": 5, "from": "km", "to": "mi"}, &out)
	if res.IsError || out.From != "km" || out.To != "mi" || out.Category != "length" || mcptest.Text(res) != "5 km = 3.10685596118667 mi" {
		t.Fatalf("convert_units = %q %+v", mcptest.Text(res), out)
	}
	res = tooltest.Call(t, cs, "convert_units", map[string]any{"value": 1, "from": "kg", "to": "km"}, nil)
	if !res.IsError || !strings.Contains(mcptest.Text(res), "cannot convert kg (mass) to km (length)") {
		t.Errorf("convert_units kg→km = %q", mcptest.Text(res))
	}
}

func TestToolDateMath(t *testing.T) {
	cs := serve(t)
	var out dateMathOut
	res := tooltest.Call(t, cs, "date_math", map[string]any{"operation": "add", "date": "2025-01-15", "amount": 90}, &out)
	if res.IsError || out.Result != "2025-04-15" || mcptest.Text(res) != "2025-01-15 + 90 days = 2025-04-15 (Tuesday)" {
		t.Fatalf("date_math add = %q %+v", mcptest.Text(res), out)
	}
	res = tooltest.Call(t, cs, "date_math", map[string]any{"operation": "between", "date": "2025-01-01", "end_date": "2025-12-25"}, &out)
	if res.IsError || out.Days == nil || *out.Days != 358 || mcptest.Text(res) != "From 2025-01-01 to 2025-12-25 is 358 days (51 weeks and 1 day)." {
		t.Fatalf("date_math between = %q %+v", mcptest.Text(res), out)
	}
	res = tooltest.Call(t, cs, "date_math", map[string]any{"operation": "weekday", "date": "1969-07-20"}, &out)
	if res.IsError || out.Weekday != "Sunday" {
		t.Fatalf("date_math weekday = %q %+v", mcptest.Text(res), out)
	}
	for _, args := range []map[string]any{
		{"operation": "add", "date": "2025-02-30", "amount": 1},
		{"operation": "multiply", "date": "2025-01-01"},
		{"operation": "add", "date": "2025-01-01", "amount": 1, "unit": "fortnights"},
	} {
		if res := tooltest.Call(t, cs, "date_math", args, nil); !res.IsError {
			t.Errorf("date_math(%v) = %q, want a tool error", args, mcptest.Text(res))
		} else {
			t.Logf("date_math(%v) → %q", args, mcptest.Text(res))
		}
	}
}

func Example() {
	v, err := Evaluate("(3 + 4) * 2^3 / 7")
	fmt.Println(v, err)
	_, err = Evaluate("1 + (2")
	fmt.Println(err)
	// Output:
	// 8 <nil>
	// expected ")" to close the "(" at position 5, found end of input at position 7
}
