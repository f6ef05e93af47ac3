package askcmd

// Durable runs end to end (docs/DURABILITY.md): a real studio runs real
// oracle, packrat and abacus processes; oracle's model is scripted to
// store a note, calculate, store a second note and answer; the test
// SIGKILLs oracle mid-run. The real `switchboard ask` process, whose keyed
// ask the studio holds across oracle's restart, must get the answer; each
// note must be in packrat once; and the model must have been asked again
// for the step in flight only.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/pool"
)

const (
	durableTask   = "note that the launch moved to Friday, work out 6*7, note the result, and tell me"
	durableNote1  = "The launch moved to Friday."
	durableNote2  = "6*7 is 42."
	durableAnswer = "Noted both; 6*7 = 42 (abacus), notes stored by packrat."
)

// stepModel is oracle's scripted model, answering by step (a step's
// request carries 2 messages plus 2 per earlier step, each of which made
// one tool call), so that a step asked again after a resume gets the same
// reply. It counts how often each step was asked and answered, and can
// hold the first request of one step until the process that sent it dies.
type stepModel struct {
	t       *testing.T
	URL     string
	replies []openai.ChatCompletionMessage
	hold    int           // the step whose first request is held; 0: none
	arrived chan struct{} // closed when the held request has arrived
	// release ends the hold: the test closes it once the killed oracle's
	// successor runs, so a held request of the dead process has ended with
	// its connection by then, and one the successor sent is answered.
	release chan struct{}

	mu       sync.Mutex // guards following
	asked    map[int]int
	answered map[int]int
}

func newStepModel(t *testing.T, hold int) *stepModel {
	return newStepModelWith(t, hold, []openai.ChatCompletionMessage{
		{ToolCalls: []openai.ToolCall{call("c1", "packrat__store_note", fmt.Sprintf(`{"text":%q}`, durableNote1))}},
		{ToolCalls: []openai.ToolCall{call("c2", "abacus__calculate", `{"expression":"6*7"}`)}},
		{ToolCalls: []openai.ToolCall{call("c3", "packrat__store_note", fmt.Sprintf(`{"text":%q}`, durableNote2))}},
		{Content: durableAnswer},
	})
}

func newStepModelWith(t *testing.T, hold int, replies []openai.ChatCompletionMessage) *stepModel {
	m := &stepModel{t: t, hold: hold, replies: replies, arrived: make(chan struct{}), release: make(chan struct{}), asked: map[int]int{}, answered: map[int]int{}}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(ts.Close)
	m.URL = ts.URL + "/v1"
	return m
}

func (m *stepModel) serve(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) < 2 || len(req.Messages)%2 != 0 {
		m.t.Errorf("step model: bad request (%d messages): %v", len(req.Messages), err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if agentOf(req.Messages[0].Content) != "oracle" {
		m.t.Errorf("step model: a request from %q", req.Messages[0].Content)
		http.Error(w, "not oracle", http.StatusBadRequest)
		return
	}
	step := len(req.Messages) / 2
	if step > len(m.replies) {
		m.t.Errorf("step model: step %d is beyond the script", step)
		http.Error(w, "beyond the script", http.StatusInternalServerError)
		return
	}
	m.mu.Lock()
	m.asked[step]++
	first := m.asked[step] == 1
	m.mu.Unlock()
	if step == m.hold && first {
		// Held until the oracle that asked is killed (its connection
		// closes, and the request's context ends), or, if the successor
		// asked, until the test releases it.
		close(m.arrived)
		select {
		case <-r.Context().Done():
			return
		case <-m.release:
			if r.Context().Err() != nil {
				return
			}
		}
	}
	reply := m.replies[step-1]
	reply.Role = openai.ChatMessageRoleAssistant
	finish := openai.FinishReasonStop
	if len(reply.ToolCalls) > 0 {
		finish = openai.FinishReasonToolCalls
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
		ID: "chatcmpl-durable", Object: "chat.completion", Model: req.Model,
		Choices: []openai.ChatCompletionChoice{{Message: reply, FinishReason: finish}},
	})
	m.mu.Lock()
	m.answered[step]++
	m.mu.Unlock()
}

func (m *stepModel) counts() (asked, answered map[int]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	asked, answered = map[int]int{}, map[int]int{}
	for k, v := range m.asked {
		asked[k] = v
	}
	for k, v := range m.answered {
		answered[k] = v
	}
	return asked, answered
}

// durableJSON is the part of ask --json this test reads.
type durableJSON struct {
	Answer              string `json:"answer"`
	Status              string `json:"status"`
	RunID               string `json:"run_id"`
	Resumed             bool   `json:"resumed"`
	ReplayedSteps       int    `json:"replayed_steps"`
	ReplayedDelegations int    `json:"replayed_delegations"`
	Error               string `json:"error"`
}

// packratNotes is every note packrat holds.
func packratNotes(t *testing.T, ctx context.Context, p *pool.Pool, st *studio.Studio) []string {
	t.Helper()
	return packratNotesAt(t, ctx, p, st.URL())
}

func killAgent(t *testing.T, st *studio.Studio, name string) {
	t.Helper()
	pid := agentInfo(t, st, name).PID
	if pid == 0 {
		t.Fatalf("agent %s has no process", name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// TestE2EDurableRunSurvivesCoordinatorKill is issue 22's finding turned
// into its fix: oracle SIGKILLed (a) while its model request for step 3
// is in flight, (b) as soon as packrat holds the first note (between the
// note and the next model step, or with that step in flight).
func TestE2EDurableRunSurvivesCoordinatorKill(t *testing.T) {
	for _, c := range []struct {
		name string
		hold int // the step whose first request is held until the kill
		// killWhen returns once the kill is due.
		afterNote bool
		// replayed is how many model steps the resumed attempt replays.
		replayed int
	}{
		{name: "model request in flight", hold: 3, replayed: 2},
		{name: "after the first note", hold: 2, afterNote: true, replayed: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
			defer cancel()
			dir := projecttest.New(t, "oracle", "packrat", "abacus")
			model := newStepModel(t, c.hold)
			st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted")
			p := newTestPool(t)
			oldPID := agentInfo(t, st, "oracle").PID

			ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", durableTask)
			if c.afterNote {
				// Polled with a deadline, no sleep: the kill is due the moment
				// packrat has committed the first note.
				tick := time.NewTicker(2 * time.Millisecond)
				for len(packratNotes(t, ctx, p, st)) == 0 {
					select {
					case <-tick.C:
					case <-ctx.Done():
						t.Fatalf("packrat never got the first note; ask stderr:\n%s", ask.stderr)
					}
				}
				tick.Stop()
			} else {
				select {
				case <-model.arrived:
				case <-ctx.Done():
					t.Fatalf("step %d was never asked; ask stderr:\n%s", c.hold, ask.stderr)
				}
			}
			killAgent(t, st, "oracle")
			tick := time.NewTicker(5 * time.Millisecond)
			for info := agentInfo(t, st, "oracle"); info.PID == oldPID || info.PID == 0; info = agentInfo(t, st, "oracle") {
				select {
				case <-tick.C:
				case <-ctx.Done():
					t.Fatalf("oracle was not restarted: %+v", info)
				}
			}
			tick.Stop()
			close(model.release)

			code := ask.wait(t)
			var out durableJSON
			if err := json.Unmarshal([]byte(ask.stdout.String()), &out); err != nil {
				t.Fatalf("ask --json printed %q: %v\nstderr:\n%s", ask.stdout, err, ask.stderr)
			}
			if code != 0 || out.Answer != durableAnswer || out.Status != "answered" {
				t.Fatalf("ask exited %d with %+v, want 0 and the answer\nstderr:\n%s", code, out, ask.stderr)
			}
			if !out.Resumed || out.ReplayedSteps != c.replayed {
				t.Errorf("resumed %v with %d replayed steps, want resumed with %d", out.Resumed, out.ReplayedSteps, c.replayed)
			}
			if now := agentInfo(t, st, "oracle").PID; now == oldPID {
				t.Errorf("oracle's process %d was not replaced", now)
			}
			if !strings.Contains(ask.stderr.String(), "resuming run "+out.RunID+" from its journal") {
				t.Errorf("stderr does not say the run was resumed:\n%s", ask.stderr)
			}

			notes := packratNotes(t, ctx, p, st)
			for _, text := range []string{durableNote1, durableNote2} {
				n := 0
				for _, got := range notes {
					if got == text {
						n++
					}
				}
				if n != 1 {
					t.Errorf("packrat holds %q %d times, want once; notes: %q", text, n, notes)
				}
			}
			if len(notes) != 2 {
				t.Errorf("packrat holds %d notes, want 2: %q", len(notes), notes)
			}

			// Every step answered once; asked again only for the step in
			// flight at the kill.
			asked, answered := model.counts()
			t.Logf("model requests by step: asked %v, answered %v; notes %d; replayed %d steps, %d delegations", asked, answered, len(notes), out.ReplayedSteps, out.ReplayedDelegations)
			for step := 1; step <= 4; step++ {
				if answered[step] != 1 {
					t.Errorf("step %d answered %d times, want once (asked %v, answered %v)", step, answered[step], asked, answered)
				}
				want := 1
				if step == c.hold && !c.afterNote {
					want = 2
				}
				if c.afterNote && step == c.hold {
					// In flight at the kill (asked twice) or not yet sent
					// (once): either way answered once, above.
					continue
				}
				if asked[step] != want {
					t.Errorf("step %d asked %d times, want %d (asked %v)", step, asked[step], want, asked)
				}
			}
		})
	}
}
