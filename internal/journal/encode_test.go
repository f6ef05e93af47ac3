package journal

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/switchboard-run/switchboard/runtime"
)

// The payloads written without json.Marshal's second pass are the bytes
// json.Marshal writes, so journals written before and after read the same.
func TestEncodeIsJSONMarshal(t *testing.T) {
	// As the runtime hands them over: written by json.Marshal.
	resp, err := json.Marshal(map[string]any{"id": "x", "choices": []any{map[string]any{"message": map[string]string{"role": "assistant", "content": "a \"quoted\" <b> & answer"}}}})
	if err != nil {
		t.Fatal(err)
	}
	result, err := json.Marshal(map[string]string{"call_id": "call<1>"})
	if err != nil {
		t.Fatal(err)
	}
	steps := []runtime.JournalStep{
		{Step: 1, Fingerprint: "ab12", Response: resp, Usage: runtime.StepUsage{Step: 1, RequestBytes: 300, Attempts: 2, Trimmed: 1}},
		{Step: 7, Fingerprint: "", Response: json.RawMessage(`[1,2]`)},
	}
	for _, s := range steps {
		got, err := encodeStep(s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("encodeStep:\n got %s\nwant %s", got, want)
		}
	}
	d := runtime.JournalDelegation{Step: 2, CallID: "call<1>", Key: "k\"ey", Outcome: "ok", Result: result}
	got, err := encodeDelegation(d)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(d)
	if !bytes.Equal(got, want) {
		t.Errorf("encodeDelegation:\n got %s\nwant %s", got, want)
	}
}

// A response that is not JSON is never written as if it were: it is
// compacted when it is JSON with spaces, stored as a string otherwise (and
// then refused on load), and none is null, as json.Marshal writes it.
func TestEncodeStepOddResponses(t *testing.T) {
	got, err := encodeStep(runtime.JournalStep{Step: 1, Response: json.RawMessage(` {"a": 1} `)})
	if err != nil {
		t.Fatal(err)
	}
	var s runtime.JournalStep
	if err := json.Unmarshal(got, &s); err != nil || string(s.Response) != `{"a":1}` {
		t.Errorf("spaced response: %s (%v), want it compacted", got, err)
	}
	got, err = encodeStep(runtime.JournalStep{Step: 1, Response: json.RawMessage(`not json`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &s); err != nil || string(s.Response) != `"not json"` {
		t.Errorf("bad response: %s (%v), want it stored as a string", got, err)
	}
	got, err = encodeStep(runtime.JournalStep{Step: 1})
	if want, _ := json.Marshal(runtime.JournalStep{Step: 1}); err != nil || !bytes.Equal(got, want) {
		t.Errorf("no response: %s (%v), want %s", got, err, want)
	}
}
