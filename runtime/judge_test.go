package runtime_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
)

// TestUnavailableMeansNothingWasDone: with abacus unavailable, a turn that
// stored a note through packrat and then refused did something, so it is
// not StatusUnavailable (which tells a caller that asking again repeats no
// effect) but StatusNotAnswered, its reason naming the refusal, the
// unavailable sibling and what was done. Without the note, the same
// refusal is StatusUnavailable; with the note and an answer, it is
// StatusAnswered.
func TestUnavailableMeansNothingWasDone(t *testing.T) {
	srv := scriptedPackrat(t, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil
	})
	dead := &mcpconfig.Server{Name: "abacus", Type: "http", URL: mcptest.DeadURL(t)}
	store := reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "packrat__store_note", `{"text":"launch on Friday"}`)}})
	refuse := reply(openai.ChatCompletionMessage{Refusal: "I cannot calculate without abacus."})
	for _, tc := range []struct {
		name    string
		answers []http.HandlerFunc // the model's, in order
		status  runtime.Status
		reason  []string
	}{
		{"a note, then a refusal", []http.HandlerFunc{store, refuse}, runtime.StatusNotAnswered, []string{
			"not answered: the model refused: I cannot calculate without abacus.", `; unavailable: agent "abacus"`, "; done before it stopped: packrat.store_note",
		}},
		{"a refusal alone", []http.HandlerFunc{refuse}, runtime.StatusUnavailable, []string{`unavailable: agent "abacus"`, "; and the model refused"}},
		{"a note, then an answer", []http.HandlerFunc{store, answer("Stored; 2+2 I cannot do.")}, runtime.StatusAnswered, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.answers...)
			a := newAgent(t, oracle(e.URL, srv, dead), nil)
			res, err := a.Run(t.Context(), "remember the launch is on Friday, then what is 2+2", chain)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status || len(res.Unavailable) != 1 {
				t.Fatalf("status %q (unavailable %q), want %q; reason %q", res.Status, res.Unavailable, tc.status, res.Reason)
			}
			for _, w := range tc.reason {
				if !strings.Contains(res.Reason, w) {
					t.Errorf("reason %q lacks %q", res.Reason, w)
				}
			}
			if tc.status == runtime.StatusAnswered && res.Reason != "" {
				t.Errorf("an answered turn has reason %q", res.Reason)
			}
		})
	}
}
