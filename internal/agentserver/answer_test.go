package agentserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestAskStreamsTheAnswer: an answer streamed a character per chunk (as
// small models on llama.cpp write it) reaches the caller of ask as
// progress messages that tell themselves apart as answer deltas
// ({"step":1,"answer_delta":...}), far fewer than the chunks, adding up to
// the answer; the tool's result is the answer, as without streaming.
func TestAskStreamsTheAnswer(t *testing.T) {
	answer := strings.Repeat("The launch moved to Friday; bring cake. ", 25) + "Done."
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range answer {
			b, _ := json.Marshal(string(c))
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":%s},"finish_reason":null}]}`+"\n\n", b)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer model.Close()
	def := &agentdef.Definition{Name: "gamma", Model: agentdef.Model{BaseURL: model.URL + "/v1", Name: "m"}}
	_, ts := newTestServer(t, def)
	var mu sync.Mutex
	var msgs []string
	cs := connect(t, ts.URL, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			msgs = append(msgs, req.Params.Message)
		},
	})
	params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "what about the launch?"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := mcptest.Text(res); !strings.HasPrefix(got, answer) {
		t.Fatalf("ask result %q, want the answer", got)
	}
	var streamed strings.Builder
	var deltas int
	collect := func() bool {
		mu.Lock()
		defer mu.Unlock()
		streamed.Reset()
		deltas = 0
		for _, m := range msgs {
			var d runtime.AnswerDelta
			if json.Unmarshal([]byte(m), &d) != nil || !strings.Contains(m, `"answer_delta"`) {
				continue
			}
			deltas++
			if d.Discard {
				streamed.Reset()
			}
			streamed.WriteString(d.Text)
		}
		return streamed.String() == answer
	}
	// go-sdk hands notifications to the handler on its own goroutine: the
	// last may be handled just after CallTool returns.
	waittest.Until(t, 10*time.Second, "the deltas to add up to the answer", collect)
	t.Logf("%d chunks of answer arrived as %d progress messages", len([]rune(answer)), deltas)
	if deltas >= len(answer)/4 {
		t.Errorf("%d chunks sent as %d progress messages, want them gathered", len(answer), deltas)
	}
}

// TestAnswerBatchOrder: a discard sends the text gathered before it, then
// itself; a new step's text goes in a message of its own; after close
// nothing is sent.
func TestAnswerBatchOrder(t *testing.T) {
	var sent []string
	b := newAnswerBatch(func(s string) { sent = append(sent, s) }, func(s string) string { return s })
	b.add(runtime.AnswerDelta{Step: 1, Text: "Let me "})
	b.add(runtime.AnswerDelta{Step: 1, Text: "check."})
	b.add(runtime.AnswerDelta{Step: 1, Discard: true})
	b.add(runtime.AnswerDelta{Step: 2, Text: "Friday."})
	b.close()
	b.add(runtime.AnswerDelta{Step: 2, Text: "late"})
	want := []string{
		`{"step":1,"answer_delta":"Let me check."}`,
		`{"step":1,"answer_delta":"","answer_discard":true}`,
		`{"step":2,"answer_delta":"Friday."}`,
	}
	if fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Errorf("sent %q\nwant %q", sent, want)
	}
}
