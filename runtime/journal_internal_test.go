package runtime

import (
	"encoding/json"
	"testing"

	"github.com/sashabaranov/go-openai"
)

// The fingerprinter hashes the bytes requestFingerprint does, so that a
// run journaled by one version of the agent resumes under the other, and
// it notices a turn's tools being replaced.
func TestFingerprinterIsRequestFingerprint(t *testing.T) {
	tools := []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: "abacus__add", Description: "adds <a> & <b>", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"}}}`)}}}
	req := openai.ChatCompletionRequest{Model: "m<1>", Tools: tools, Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: "be <brief>"}, {Role: openai.ChatMessageRoleUser, Content: "what is 6 times 7?"}}}
	var f fingerprinter
	check := func(what string) {
		t.Helper()
		want, err := requestFingerprint(&req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.fingerprint(&req)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: fingerprinter %s, requestFingerprint %s", what, got, want)
		}
	}
	check("step 1")
	req.Messages = append(req.Messages,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{ID: "c1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "abacus__add", Arguments: `{"a":6}`}}}},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: "c1", Content: "42"})
	check("step 2")
	req.Tools = append([]openai.Tool{}, tools...)
	req.Tools[0].Function = &openai.FunctionDefinition{Name: "other"}
	check("tools replaced")
	req.Tools = nil
	check("no tools")
	req.Tools = []openai.Tool{}
	check("empty tools")
}
