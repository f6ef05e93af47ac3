package askcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/runtime"
)

// notifyAnswer sends d as the agent server's ask tool does: a progress
// notification whose message is the delta's JSON.
func notifyAnswer(ctx context.Context, req *mcp.CallToolRequest, n int, d runtime.AnswerDelta) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: req.Params.GetProgressToken(), Progress: float64(n), Message: string(b),
	})
}

// askStreaming runs ask in-process against an agent that sends deltas,
// waits until stdout shows seen (when set) and answers final.
func askStreaming(t *testing.T, deltas []runtime.AnswerDelta, seen, final string, args ...string) (code int, stdout, stderr *watcher) {
	t.Helper()
	stdout, stderr = newWatcher(seen), newWatcher("")
	url := fakeStudio(t, "oracle", func(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
		for i, d := range deltas {
			if err := notifyAnswer(ctx, req, i+1, d); err != nil {
				return nil, nil, err
			}
		}
		if seen != "" {
			select {
			case <-stdout.seen:
			case <-time.After(testDeadline):
				return nil, nil, errors.New("the answer was not printed as it came")
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: final}}}, nil, nil
	})
	code = Main(t.Context(), append([]string{"--studio", url}, append(args, "when is the launch?")...), nil, stdout, stderr)
	return code, stdout, stderr
}

// TestAskPrintsTheAnswerAsItComes: the answer's pieces are printed on
// stdout while the agent is still working (it answers only once they have
// been printed), and the answer is not printed a second time.
func TestAskPrintsTheAnswerAsItComes(t *testing.T) {
	t.Setenv(EnvAskStream, "1")
	code, stdout, stderr := askStreaming(t, []runtime.AnswerDelta{
		{Step: 1, Text: "The launch"}, {Step: 1, Text: " moved to Friday."},
	}, "The launch moved to Friday.", "The launch moved to Friday.")
	if code != exitOK || stdout.String() != "The launch moved to Friday.\n" {
		t.Errorf("exit %d, stdout %q, want the answer once\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestAskPrintsTheFinalAnswerWhenTheStreamWasNotIt: text withdrawn by the
// agent is followed by a line on stderr saying so; when what was printed
// after the last withdrawal is not the final answer, stderr says so and
// the final answer is printed whole, last.
func TestAskPrintsTheFinalAnswerWhenTheStreamWasNotIt(t *testing.T) {
	t.Setenv(EnvAskStream, "1")
	code, stdout, stderr := askStreaming(t, []runtime.AnswerDelta{
		{Step: 1, Text: "Let me check"}, {Step: 1, Discard: true}, {Step: 2, Text: "Fri"},
	}, "Fri", "Friday is the day.")
	if code != exitOK || stdout.String() != "Let me check\nFri\nFriday is the day.\n" {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
	for _, want := range []string{"the text above was not the answer", "the answer as it came is not the final one; the final answer:"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
}

// TestAskWithoutStreaming: with --json, or $SWITCHBOARD_ASK_STREAM=0, or
// on a stdout that is no terminal, the deltas are printed nowhere and the
// answer once, at the end; a value of the variable that is neither 1 nor
// 0 is a usage error naming it.
func TestAskWithoutStreaming(t *testing.T) {
	deltas := []runtime.AnswerDelta{{Step: 1, Text: "Friday"}}
	for _, tc := range []struct {
		env  string
		args []string
		want func(string) bool
	}{
		{"1", []string{"--json"}, func(s string) bool { return strings.HasPrefix(s, `{"answer":"Friday."`) }},
		{"0", nil, func(s string) bool { return s == "Friday.\n" }},
		{"", nil, func(s string) bool { return s == "Friday.\n" }},
	} {
		t.Setenv(EnvAskStream, tc.env)
		code, stdout, stderr := askStreaming(t, deltas, "", "Friday.", tc.args...)
		if code != exitOK || !tc.want(stdout.String()) || strings.Contains(stderr.String(), "answer_delta") {
			t.Errorf("$%s=%q %v: exit %d, stdout %q, stderr %q", EnvAskStream, tc.env, tc.args, code, stdout, stderr)
		}
	}
	t.Setenv(EnvAskStream, "yes")
	code, _, stderr := askStreaming(t, deltas, "", "Friday.")
	if code != exitUsage || !strings.Contains(stderr.String(), EnvAskStream) || !strings.Contains(stderr.String(), `"yes"`) {
		t.Errorf("$%s=yes: exit %d, stderr %q; want a usage error naming it", EnvAskStream, code, stderr)
	}
}

// TestE2EStreamedAnswerPrintedOnce: a real studio, a real agent process
// whose model streams its answer a few characters a chunk with a <think>
// block first, and `switchboard ask` as a process with
// $SWITCHBOARD_ASK_STREAM=1: stdout is the answer, once, without the
// thinking.
func TestE2EStreamedAnswerPrintedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	const content = "<think>\nthe person asks about the launch\n</think>\n\nThe launch moved to Friday; bring cake."
	sent, release := make(chan struct{}, 1), make(chan struct{})
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			t.Errorf("the agent asked for no stream")
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < len(content); i += 3 {
			b, _ := json.Marshal(content[i:min(i+3, len(content))])
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":%s},"finish_reason":null}]}`+"\n\n", b)
			w.(http.Flusher).Flush()
		}
		// The answer is finished only once ask has printed all of it: it
		// was printed as it came, not from the result.
		sent <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":30,"total_tokens":50}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer model.Close()
	defer func() { // a failed test must not leave the handler waiting, nor Close
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	dir := t.TempDir()
	agentWithModel(t, dir, "alpha", 4, `{}`)
	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL+"/v1", "OPENAI_MODEL=m")
	ask := startAskEnv(t, ctx, dir, cleanEnv(EnvAskStream+"=1"), "--studio", st.URL(), "--agent", "alpha", "what about the launch?")
	select {
	case <-sent:
	case <-ctx.Done():
		t.Fatalf("the model was not asked\nstderr:\n%s", ask.stderr)
	}
	waittest.Until(t, testDeadline, "ask to print the answer as it comes", func() bool {
		return strings.Contains(ask.stdout.String(), "The launch moved to Friday; bring cake.")
	})
	close(release)
	code := ask.wait(t)
	// alpha has no tools, which its turn notes; the answer is what counts
	// here.
	if got := ask.stdout.String(); got != "The launch moved to Friday; bring cake.\n" {
		t.Errorf("exit %d, stdout %q, want the answer once\nstderr:\n%s", code, got, ask.stderr)
	}
	if strings.Contains(ask.stderr.String(), "final answer") {
		t.Errorf("stderr %q: the streamed answer was taken for another", ask.stderr)
	}
}
