package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// Load an agent folder and run one turn: the model (any OpenAI-compatible
// endpoint; here a scripted one) calls a sibling's tool through the pool,
// reads its result and answers.
func Example() {
	// The sibling the agent's tools/mcp.json names: any MCP server over
	// Streamable HTTP (or stdio, for an agent with allow_stdio).
	type note struct {
		Text string `json:"text"`
	}
	notes := mcp.NewServer(&mcp.Implementation{Name: "notes"}, nil)
	mcp.AddTool(notes, &mcp.Tool{Name: "save", Description: "Save a note."},
		func(_ context.Context, _ *mcp.CallToolRequest, in note) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "saved note 1: " + in.Text}}}, nil, nil
		})
	sibling := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return notes }, nil))
	defer sibling.Close()
	model := httptest.NewServer(http.HandlerFunc(playScript))
	defer model.Close()

	// testdata/scribe/tools/mcp.json says "url": "${NOTES_URL}".
	def, err := agentdef.LoadWith("testdata/scribe", func(name string) (string, bool) {
		return sibling.URL, name == "NOTES_URL"
	})
	if err != nil {
		log.Fatal(err)
	}
	p := pool.New(nil) // the agent's MCP client; closing it ends its sessions
	defer p.Close()
	agent, err := runtime.New(def, p, &runtime.Options{
		BaseURL: model.URL, // empty: $OPENAI_BASE_URL, else agent.json, else the builtin model
		// Only this example's settings: no $OPENAI_MODEL or $OPENAI_API_KEY.
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		log.Fatal(err)
	}
	// A turn runs as part of a delegation chain, which this agent enters
	// first (a caller's chain arrives in the _meta of its tools/call).
	chain, err := delegation.Chain{}.Enter(def.Name, def.MaxDepth)
	if err != nil {
		log.Fatal(err)
	}
	res, err := agent.Run(context.Background(), "the launch moved to Friday", chain)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s after %d steps: %s\n", res.Status, res.Steps, res.Answer)
	for _, d := range res.Delegations {
		fmt.Printf("delegated to %s.%s: %s\n", d.Agent, d.Tool, d.Outcome)
	}
	// Output:
	// answered after 2 steps: Done. saved note 1: the launch moved to Friday
	// delegated to notes.save: ok
}

// playScript is an OpenAI-compatible chat completions endpoint that plays a
// two-step script: it calls the first tool offered with the task as its
// text, then answers with what the tool returned.
func playScript(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct{ Role, Content string }
		Tools    []struct{ Function struct{ Name string } }
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 || len(req.Tools) == 0 {
		http.Error(w, "want a chat completion request offering a tool", http.StatusBadRequest)
		return
	}
	last := req.Messages[len(req.Messages)-1]
	msg := map[string]any{"role": "assistant"}
	if last.Role == "tool" {
		msg["content"] = "Done. " + last.Content
	} else {
		args, _ := json.Marshal(map[string]string{"text": last.Content})
		msg["tool_calls"] = []any{map[string]any{
			"id": "call_1", "type": "function",
			"function": map[string]any{"name": req.Tools[0].Function.Name, "arguments": string(args)},
		}}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": msg}}})
}
