package runtime

import (
	"encoding/json"
	"testing"

	"github.com/sashabaranov/go-openai"
)

// The fingerprinter, hashing only what each step added, gives what
// requestFingerprint gives from scratch for the whole request; it notices
// a turn's tools being replaced, and an earlier message changed in place
// (a tool result left out to fit the context) changes the fingerprint.
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
	first, _ := f.fingerprint(&req)
	req.Messages = append(req.Messages,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{ID: "c1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "abacus__add", Arguments: `{"a":6}`}}}},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: "c1", Content: "42"})
	check("step 2")
	second, _ := f.fingerprint(&req)
	req.Messages[3].Content = "[left out]"
	check("an earlier message changed")
	if third, _ := f.fingerprint(&req); third == second || second == first {
		t.Errorf("fingerprints of different requests are equal: %s, %s, %s", first, second, third)
	}
	req.Messages[2].ToolCalls[0].Function.Arguments = `{"a":7}`
	check("an earlier message's tool call changed in place")
	req.Messages = req.Messages[:2]
	if got, _ := f.fingerprint(&req); got != first {
		t.Errorf("the first step's request again: %s, want %s", got, first)
	}
	req.Tools = append([]openai.Tool{}, tools...)
	req.Tools[0].Function = &openai.FunctionDefinition{Name: "other"}
	check("tools replaced")
	req.Tools = nil
	check("no tools")
	req.Tools = []openai.Tool{}
	check("empty tools")
}

// A step journaled before the fingerprint was a chain (its fingerprint the
// SHA-256 of the request's JSON, requestFingerprintV1) still matches the
// same request on resume, and not another.
func TestFingerprintV1StillResumes(t *testing.T) {
	req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}}
	v1, err := requestFingerprintV1(&req)
	if err != nil {
		t.Fatal(err)
	}
	var f fingerprinter
	now, err := f.fingerprint(&req)
	if err != nil {
		t.Fatal(err)
	}
	if same, err := f.same(v1, now, &req); err != nil || !same {
		t.Errorf("a v1 fingerprint of the same request: same = %v, %v; want true", same, err)
	}
	if same, _ := f.same(now, now, &req); !same {
		t.Error("the v2 fingerprint of the same request: same = false")
	}
	other := req
	other.Messages = []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "bye"}}
	now2, _ := f.fingerprint(&other)
	if same, _ := f.same(v1, now2, &other); same {
		t.Error("a v1 fingerprint of another request: same = true")
	}
	if same, _ := f.same(now, now2, &other); same {
		t.Error("the v2 fingerprint of another request: same = true")
	}
}
