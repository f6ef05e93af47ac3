package runtime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/agents/abacus"
	"github.com/switchboard-run/switchboard/agents/packrat"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// serve puts s on loopback HTTP for the test.
func serve(t *testing.T, name string, s *mcp.Server) *mcpconfig.Server {
	t.Helper()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return &mcpconfig.Server{Name: name, Type: mcpconfig.TypeHTTP, URL: ts.URL}
}

// TestBuiltinModelAnswersTheREADMEExample runs the bundled oracle, driven by
// the builtin model through the real go-openai path, against the real
// packrat and abacus toolsets.
func TestBuiltinModelAnswersTheREADMEExample(t *testing.T) {
	def, err := agentdef.Load("../agents/oracle")
	if err != nil {
		t.Fatal(err)
	}
	ps := mcp.NewServer(&mcp.Implementation{Name: "packrat"}, nil)
	closer, err := packrat.Register(ps, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	as := mcp.NewServer(&mcp.Implementation{Name: "abacus"}, nil)
	if err := abacus.Register(as); err != nil {
		t.Fatal(err)
	}
	def.MCP = &mcpconfig.Config{Path: def.MCP.Path, Servers: []*mcpconfig.Server{serve(t, "packrat", ps), serve(t, "abacus", as)}}

	a := newAgent(t, def, nil)
	if name, where := a.Model(); name != runtime.BuiltinModel || where != "builtin" {
		t.Fatalf("model %s at %s, want the builtin model", name, where)
	}
	res, err := a.Run(t.Context(), "remember that the launch moved to Friday, then tell me what you know about the launch", chain)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("answer after %d steps: %s", res.Steps, res.Answer)
	if !strings.Contains(res.Answer, "Friday") {
		t.Errorf("answer %q does not mention Friday", res.Answer)
	}
	var tools []string
	for _, d := range res.Delegations {
		if d.Outcome != delegation.OutcomeOK {
			t.Errorf("delegation %+v failed", d)
		}
		tools = append(tools, d.Agent+"."+d.Tool)
	}
	if len(tools) < 2 || tools[0] != "packrat.store_note" {
		t.Errorf("delegations %v, want packrat.store_note first and then a lookup", tools)
	}
}

// bundledTeam is the oracle with the real packrat and abacus behind it on
// loopback HTTP. calls records every tools/call the siblings received,
// with its arguments as they arrived; notes reads packrat's archive
// through its own list_notes.
type bundledTeam struct {
	agent      *runtime.Agent
	packratURL string
	mu         sync.Mutex
	calls      []string // "agent.tool {args}", guarded by mu
}

func newBundledTeam(t *testing.T) *bundledTeam {
	t.Helper()
	def, err := agentdef.Load("../agents/oracle")
	if err != nil {
		t.Fatal(err)
	}
	team := &bundledTeam{}
	ps := mcp.NewServer(&mcp.Implementation{Name: "packrat"}, nil)
	closer, err := packrat.Register(ps, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	as := mcp.NewServer(&mcp.Implementation{Name: "abacus"}, nil)
	if err := abacus.Register(as); err != nil {
		t.Fatal(err)
	}
	ps.AddReceivingMiddleware(team.record("packrat"))
	as.AddReceivingMiddleware(team.record("abacus"))
	pSrv := serve(t, "packrat", ps)
	team.packratURL = pSrv.URL
	def.MCP = &mcpconfig.Config{Path: def.MCP.Path, Servers: []*mcpconfig.Server{pSrv, serve(t, "abacus", as)}}
	team.agent = newAgent(t, def, nil)
	return team
}

// record is a middleware noting each tools/call, arguments re-encoded
// with sorted keys so that they compare as text.
func (team *bundledTeam) record(agent string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok {
				var args map[string]any
				json.Unmarshal(r.Params.Arguments, &args)
				b, _ := json.Marshal(args)
				team.mu.Lock()
				team.calls = append(team.calls, agent+"."+r.Params.Name+" "+string(b))
				team.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	}
}

func (team *bundledTeam) received() []string {
	team.mu.Lock()
	defer team.mu.Unlock()
	return append([]string(nil), team.calls...)
}

// notes is the text of every note packrat holds, newest first, as its
// list_notes reports them to a client of its own.
func (team *bundledTeam) notes(t *testing.T) []string {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "observer"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: team.packratURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"limit": 100}})
	if err != nil || res.IsError {
		t.Fatalf("list_notes: %v %s", err, mcptest.Text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Notes []struct {
			Text string `json:"text"`
		} `json:"notes"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, n := range out.Notes {
		texts = append(texts, n.Text)
	}
	return texts
}

// TestBuiltinReadsTheToolsPhrasings: each question the tools' own
// descriptions ask, in the forms people write it, reaches the right
// sibling tool with the right arguments, and the turn answers with what
// the real tool computed.
func TestBuiltinReadsTheToolsPhrasings(t *testing.T) {
	team := newBundledTeam(t)
	for _, tc := range []struct{ task, call, answer string }{
		{"how many days between March 1, 2026 and March 9, 2026?",
			`abacus.date_math {"date":"2026-03-01","end_date":"2026-03-09","operation":"between"}`,
			"abacus.date_math: From 2026-03-01 to 2026-03-09 is 8 days (1 week and 1 day)."},
		{"what weekday is 2026-03-01?",
			`abacus.date_math {"date":"2026-03-01","operation":"weekday"}`,
			"abacus.date_math: 2026-03-01 is a Sunday (ISO week 9, day 60 of the year)."},
		{"what day of the week is March 1, 2026?",
			`abacus.date_math {"date":"2026-03-01","operation":"weekday"}`,
			"abacus.date_math: 2026-03-01 is a Sunday (ISO week 9, day 60 of the year)."},
		{"what date is 90 days after 2025-01-15?",
			`abacus.date_math {"amount":90,"date":"2025-01-15","operation":"add","unit":"days"}`,
			"abacus.date_math: 2025-01-15 + 90 days = 2025-04-15 (Tuesday)"},
		{"how many grams in 3.5 pounds?",
			`abacus.convert_units {"from":"pounds","to":"grams","value":3.5}`,
			"abacus.convert_units: 3.5 lb = 1587.573295 g"},
		{"what is 100 °F in °C?",
			`abacus.convert_units {"from":"°F","to":"°C","value":100}`,
			"abacus.convert_units: 100 °F = 37.7777777777778 °C"},
		{"what is 17% of 2340?",
			`abacus.calculate {"expression":"17/100*2340"}`,
			"abacus.calculate: 17/100*2340 = 397.8"},
		{"what is 6 times 7 plus 0.5?",
			`abacus.calculate {"expression":"6 * 7 + 0.5"}`,
			"abacus.calculate: 6 * 7 + 0.5 = 42.5"},
	} {
		t.Run(tc.task, func(t *testing.T) {
			before := len(team.received())
			res, err := team.agent.Run(t.Context(), tc.task, chain)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != runtime.StatusAnswered || res.Answer != tc.answer {
				t.Errorf("status %s (%s), answer %q\nwant answered with %q", res.Status, res.Reason, res.Answer, tc.answer)
			}
			if got := team.received()[before:]; !reflect.DeepEqual(got, []string{tc.call}) {
				t.Errorf("the siblings received %q, want %q", got, tc.call)
			}
		})
	}
}

// TestBuiltinDoesBothParts: the tester's task, "A and B" with each part a
// whole step, stores the note and does the arithmetic.
func TestBuiltinDoesBothParts(t *testing.T) {
	team := newBundledTeam(t)
	res, err := team.agent.Run(t.Context(), "remember that the launch moved to Friday and work out 17% of 2340", chain)
	if err != nil {
		t.Fatal(err)
	}
	want := "packrat.store_note: Stored note 1.\nabacus.calculate: 17/100*2340 = 397.8"
	if res.Status != runtime.StatusAnswered || res.Answer != want {
		t.Errorf("status %s (%s), answer %q\nwant answered with %q", res.Status, res.Reason, res.Answer, want)
	}
	calls := []string{`packrat.store_note {"text":"the launch moved to Friday"}`, `abacus.calculate {"expression":"17/100*2340"}`}
	if got := team.received(); !reflect.DeepEqual(got, calls) {
		t.Errorf("the siblings received %q, want %q", got, calls)
	}
	if notes := team.notes(t); !reflect.DeepEqual(notes, []string{"the launch moved to Friday"}) {
		t.Errorf("packrat holds %q, want the launch note alone", notes)
	}
}

// TestBuiltinRefusesTheUncertainPart: when one part of the task cannot be
// read with certainty, the turn is not answered, the refusal names that
// part, no sibling is called, and packrat's archive is unchanged.
func TestBuiltinRefusesTheUncertainPart(t *testing.T) {
	team := newBundledTeam(t)
	for _, tc := range []struct{ task, answer string }{
		{"remember that the launch moved to Friday and work out 17% of",
			`I can't tell what to do with "work out 17% of": cannot read "17% of" as arithmetic: "of" is not a number, a constant or a function call.` + "\n" +
				`I did none of the task, so that no part of it is done without the rest: "remember that the launch moved to Friday" is not done either.`},
		{"remember that the launch moved to Friday and what weekday is 03/04/2026",
			`I can't tell what to do with "what weekday is 03/04/2026": "03/04/2026" is ambiguous: it is March 4, 2026 read month first and April 3, 2026 read day first; write it as YYYY-MM-DD.` + "\n" +
				`I did none of the task, so that no part of it is done without the rest: "remember that the launch moved to Friday" is not done either.`},
	} {
		t.Run(tc.task, func(t *testing.T) {
			before := len(team.received()) // the observer's own list_notes calls are recorded too
			res, err := team.agent.Run(t.Context(), tc.task, chain)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != runtime.StatusNotAnswered || res.Answer != tc.answer {
				t.Errorf("status %s, answer %q\nwant not answered with %q", res.Status, res.Answer, tc.answer)
			}
			if want := "not answered: the model refused: " + tc.answer; res.Reason != want {
				t.Errorf("reason %q, want %q", res.Reason, want)
			}
			if got := team.received()[before:]; len(res.Delegations) != 0 || len(got) != 0 {
				t.Errorf("delegations %+v, calls received %q: want none", res.Delegations, got)
			}
			if notes := team.notes(t); len(notes) != 0 {
				t.Errorf("packrat holds %q, want nothing", notes)
			}
		})
	}
}
