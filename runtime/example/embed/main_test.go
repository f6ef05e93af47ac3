package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/runtime"
)

// The agent folder scribe delegates to a sibling named notes, at
// ${NOTES_URL}; here that is a go-sdk server on loopback, and the model is
// a scripted OpenAI-compatible endpoint, the only part that is not real.
func Example() {
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
	os.Setenv("NOTES_URL", sibling.URL) // read by agentdef.Load, for tools/mcp.json
	defer os.Unsetenv("NOTES_URL")

	opts := &runtime.Options{BaseURL: model.URL, Getenv: func(string) string { return "" }}
	if err := run(context.Background(), os.Stdout, "scribe", "the launch moved to Friday", opts); err != nil {
		panic(err)
	}
	// Output:
	// delegated to notes.save: ok
	// answered (scribe): Done. saved note 1: the launch moved to Friday
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
