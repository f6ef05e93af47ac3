package askcmd

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func elicitFrom(t *testing.T, stdin string, params *mcp.ElicitParams) (*mcp.ElicitResult, string) {
	t.Helper()
	var out bytes.Buffer
	e := newElicitor("oracle", strings.NewReader(stdin), &out)
	res, err := e.elicit(context.Background(), &mcp.ElicitRequest{Params: params})
	if err != nil {
		t.Fatal(err)
	}
	// Drain, so that the reading goroutine ends.
	for range e.lines {
	}
	return res, out.String()
}

// TestElicitor: each field is asked in name order; an empty line takes the
// default, or leaves an optional field out; an answer that does not fit
// the type (or the enum) is asked again; stdin's end cancels.
func TestElicitor(t *testing.T) {
	form := &mcp.ElicitParams{Message: "Book it?", RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"confirm": map[string]any{"type": "boolean", "default": false},
			"count":   map[string]any{"type": "integer"},
			"room":    map[string]any{"type": "string", "enum": []any{"a", "b"}},
			"note":    map[string]any{"type": "string"},
			"ratio":   map[string]any{"type": "number", "default": 0.5},
		},
		"required": []any{"count"},
	}}
	res, out := elicitFrom(t, "\nx\n\n3\n\n\nc\nb\n", form)
	want := map[string]any{"confirm": false, "count": int64(3), "room": "b", "ratio": 0.5}
	if res.Action != "accept" || !reflect.DeepEqual(res.Content, want) {
		t.Fatalf("got %s %v, want accept %v\n%s", res.Action, res.Content, want, out)
	}
	for _, s := range []string{"│ Book it?", `want an integer, not "x"`, "count is required", `want one of [a b], not "c"`, "default false"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if strings.Index(out, "confirm") > strings.Index(out, "count [") {
		t.Errorf("fields not asked in name order:\n%s", out)
	}

	res, _ = elicitFrom(t, "maybe\n", form)
	if res.Action != "cancel" {
		t.Errorf("stdin ended mid-form: %s, want cancel", res.Action)
	}
	res, out = elicitFrom(t, "", &mcp.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.test/"})
	if res.Action != "decline" || !strings.Contains(out, "https://example.test/") {
		t.Errorf("url elicitation: %s\n%s", res.Action, out)
	}
}

// TestElicitDeclineAll: with nobody to ask, every elicitation is declined,
// and stderr says so.
func TestElicitDeclineAll(t *testing.T) {
	var out bytes.Buffer
	res, err := declineAll("oracle", &out)(context.Background(), &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "Delete 3 notes?"}})
	if err != nil || res.Action != "decline" || !strings.Contains(out.String(), "Delete 3 notes?") {
		t.Fatalf("%v %+v %q", err, res, out.String())
	}
}
