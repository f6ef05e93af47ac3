package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestAnswers(t *testing.T) {
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, true},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x"}}`, true},
		{` { "id" : 7 , "result" : `, true},                 // the start is enough
		{`{"jsonrpc":"2.0","result":{"a":1},"id":7}`, true}, // id after: still the POST's only answer
		{`{"jsonrpc":"2.0","id":7.0,"result":{}}`, true},
		{`{"jsonrpc":"2.0","id":8,"result":{}}`, false},
		{`{"jsonrpc":"2.0","id":"7","result":{}}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}`, false}, // a request to the client, same id
		{`{"jsonrpc":"2.0","x":{"result":1},"method":"m"}`, false},                        // nested keys are not top-level
		{`{"jsonrpc":"2.0","x":"\"result\":","method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":7`, false}, // ends before it can tell
		{`[{"id":7,"result":{}}]`, false},
		{``, false},
		{`not json`, false},
	} {
		if got := answers([]byte(tc.data), json.RawMessage("7")); got != tc.want {
			t.Errorf("answers(%s) = %v, want %v", tc.data, got, tc.want)
		}
	}
}

// FuzzCutBody: whatever the agent sends, the body passes it through
// unchanged, and a cut appends at most the end of a half-written event and
// one message.
func FuzzCutBody(f *testing.F) {
	f.Add([]byte(progressEvent+answerEvent), 5, true)
	f.Add([]byte(progressEvent+"data: {\"id\":7,\"res"), 3, true)
	f.Add([]byte("id: a_1\ndata:\n\n"), 1, false)
	f.Fuzz(func(t *testing.T, sent []byte, chunk int, cut bool) {
		chunk = max(1, min(chunk, 64))
		var end error = io.EOF
		if cut {
			end = io.ErrUnexpectedEOF
		}
		b := &cutBody{ReadCloser: io.NopCloser(&chunked{data: sent, n: chunk, end: end}), id: json.RawMessage("7"),
			method: "tools/call", name: func() string { return "a" }, logger: slog.New(slog.DiscardHandler), lineStart: true}
		got, err := io.ReadAll(b)
		if !cut || b.answered || b.resumable {
			if !bytes.Equal(got, sent) || !errors.Is(err, end) && !(err == nil && end == io.EOF) {
				t.Fatalf("got %q, %v; want %q, %v", got, err, sent, end)
			}
			return
		}
		if err != nil || !bytes.HasPrefix(got, sent) {
			t.Fatalf("got %q, %v; want %q and more", got, err, sent)
		}
		tail := string(got[len(sent):])
		if !strings.HasSuffix(tail, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32060,"+
			fmt.Sprintf("\"message\":\"agent a cut its answer to tools/call after it began: %v; it may have run, and its outcome is unknown\",", end)+
			"\"data\":{\"agent\":\"a\",\"outcomeUnknown\":true}}}\n\n") {
			t.Fatalf("tail %q", tail)
		}
	})
}

// chunked reads data n bytes at a time, then end.
type chunked struct {
	data []byte
	n    int
	end  error
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, c.end
	}
	k := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[k:]
	return k, nil
}

// BenchmarkCut reads an agent's SSE answer through the body as it was
// (plain) and through cutBody (cut), in 32 KiB reads as ReverseProxy does:
// a small result and a 1 MB one, each after a progress event.
//
//	go run ./internal/benchratio/rounds -n 7 -benchtime 0.5s -pkg ./internal/proxy -bench Cut \
//		-variants plain,cut | go run ./internal/benchratio -baseline plain
func BenchmarkCut(b *testing.B) {
	large := progressEvent + "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" +
		strings.Repeat("0123456789abcdef", 1<<20/16) + "\"}]}}\n\n"
	buf := make([]byte, copyBufferSize)
	for _, variant := range []string{"plain", "cut"} {
		b.Run(variant, func(b *testing.B) {
			for _, c := range []struct{ name, body string }{{"small", progressEvent + answerEvent}, {"1mb", large}} {
				b.Run(c.name, func(b *testing.B) {
					b.SetBytes(int64(len(c.body)))
					b.ReportAllocs()
					r := strings.NewReader(c.body)
					for b.Loop() {
						r.Reset(c.body)
						var body io.Reader = r
						if variant == "cut" {
							body = &cutBody{ReadCloser: io.NopCloser(r), id: json.RawMessage("7"), method: "tools/call",
								name: func() string { return "a" }, logger: slog.New(slog.DiscardHandler), lineStart: true}
						}
						for {
							if _, err := body.Read(buf); err != nil {
								break
							}
						}
					}
				})
			}
		})
	}
}
