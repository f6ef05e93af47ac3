package askcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestE2EGracefulRestartResumesTheRun: the studio's restart button (POST
// /api/agents/oracle/restart, as the page sends it) stops oracle with
// SIGTERM while its model request for step 3 is in flight, after the first
// note and the calculation. oracle drains; its shutdown grace ends with
// the run still in flight, and the run is cut off. Before, the cut was the
// run's end (failed) and the ask's recorded answer, and `ask` failed with
// it. Now the run is left as a SIGKILL leaves it: the caller's keyed ask,
// sent again while the studio holds it for oracle's next process, resumes
// it there. The answer comes, each note is stored once, and only step 3
// is asked again.
func TestE2EGracefulRestartResumesTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	model := newStepModel(t, 3)
	// A short grace: the held request outlasts any grace, so the drain
	// always ends by cutting the run off.
	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted", "SWITCHBOARD_SHUTDOWN_GRACE=300ms")
	p := newTestPool(t)
	oldPID := agentInfo(t, st, "oracle").PID

	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", durableTask)
	select {
	case <-model.arrived:
	case <-ctx.Done():
		t.Fatalf("step 3 was never asked; ask stderr:\n%s", ask.stderr)
	}
	restartButton(t, ctx, st, "oracle")
	tick := time.NewTicker(5 * time.Millisecond)
	for info := agentInfo(t, st, "oracle"); info.PID == oldPID || info.PID == 0 || info.State != studioapi.StateRunning; info = agentInfo(t, st, "oracle") {
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
	if !out.Resumed || out.ReplayedSteps != 2 || out.ReplayedDelegations != 2 {
		t.Errorf("resumed %v with %d replayed steps and %d delegations, want resumed with 2 and 2", out.Resumed, out.ReplayedSteps, out.ReplayedDelegations)
	}
	// ask's stderr usually says so too ("resuming run R from its journal"),
	// but that line is a progress notification of the resent call, which
	// was once not printed: --json is what this test reads.
	t.Logf("ask stderr:\n%s", ask.stderr)

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
	asked, answered := model.counts()
	t.Logf("model requests by step: asked %v, answered %v", asked, answered)
	for step := 1; step <= 4; step++ {
		want := 1
		if step == 3 {
			want = 2 // in flight at the cut, asked again by the resume
		}
		if asked[step] != want || answered[step] != 1 {
			t.Errorf("step %d asked %d and answered %d times, want %d and once (asked %v, answered %v)", step, asked[step], answered[step], want, asked, answered)
		}
	}
}

// TestE2EGracefulRestartDuringAResumeByHand: a run failed (ask
// interrupted with its step 2 in flight); `ask --resume RUN` is under way,
// step 2 asked again and held, when the restart button stops oracle. The
// resume's own key is not the run's, so its resend is a resume by run id
// again: it reaches oracle's next process and the run answers. The note of
// step 1 is stored once.
func TestE2EGracefulRestartDuringAResumeByHand(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	const answer = "Noted (packrat)."
	model := newStepModelWith(t, 2, []openai.ChatCompletionMessage{
		{ToolCalls: []openai.ToolCall{call("c1", "packrat__store_note", fmt.Sprintf(`{"text":%q}`, durableNote1))}},
		{Content: answer},
	})
	// The resume's step 2 request is held too, until oracle's next process
	// runs: the first attempt's hold is the model's own (its first request
	// of step 2), the resume's is this one.
	second := make(chan struct{})
	var once sync.Once
	resumed := make(chan struct{})
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req openai.ChatCompletionRequest
		json.Unmarshal(body, &req)
		if len(req.Messages)/2 == 2 {
			asked, _ := model.counts()
			if asked[2] == 1 {
				first := false
				once.Do(func() { first = true })
				if first {
					close(second)
					select {
					case <-resumed:
					case <-r.Context().Done():
						return
					}
				}
			}
		}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.URL.Path = strings.TrimPrefix(r2.URL.Path, "/v1")
		proxyTo(w, r2, model.URL)
	}))
	t.Cleanup(held.Close)
	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+held.URL+"/v1", "OPENAI_MODEL=scripted", "SWITCHBOARD_SHUTDOWN_GRACE=300ms")
	p := newTestPool(t)
	oldPID := agentInfo(t, st, "oracle").PID

	first := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", "note that the launch moved to Friday")
	select {
	case <-model.arrived:
	case <-ctx.Done():
		t.Fatalf("step 2 was never asked; stderr:\n%s", first.stderr)
	}
	if err := first.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	first.wait(t)
	var failed durableJSON
	if err := json.Unmarshal([]byte(first.stdout.String()), &failed); err != nil || failed.RunID == "" {
		t.Fatalf("ask --json printed %q (%v), want the run's id", first.stdout, err)
	}

	again := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", "--resume", failed.RunID)
	select {
	case <-second:
	case <-ctx.Done():
		t.Fatalf("the resume never asked step 2; stderr:\n%s", again.stderr)
	}
	restartButton(t, ctx, st, "oracle")
	tick := time.NewTicker(5 * time.Millisecond)
	for info := agentInfo(t, st, "oracle"); info.PID == oldPID || info.PID == 0 || info.State != studioapi.StateRunning; info = agentInfo(t, st, "oracle") {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("oracle was not restarted: %+v", info)
		}
	}
	tick.Stop()
	close(resumed)
	close(model.release)

	code := again.wait(t)
	var out durableJSON
	if err := json.Unmarshal([]byte(again.stdout.String()), &out); err != nil {
		t.Fatalf("ask --resume --json printed %q: %v\nstderr:\n%s", again.stdout, err, again.stderr)
	}
	if code != 0 || out.Answer != answer || out.RunID != failed.RunID || !out.Resumed || out.ReplayedSteps != 1 {
		t.Fatalf("the resume exited %d with %+v, want 0, the answer, run %s resumed with step 1 replayed\nstderr:\n%s", code, out, failed.RunID, again.stderr)
	}
	if notes := packratNotes(t, ctx, p, st); len(notes) != 1 || notes[0] != durableNote1 {
		t.Errorf("packrat holds %q, want the one note once", notes)
	}
}

// restartButton posts the agent page's restart, as the page does.
func restartButton(t *testing.T, ctx context.Context, st *studio.Studio, name string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.URL()+"/api/agents/"+name+"/restart", strings.NewReader(`{"reason":"graceful restart mid-run"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("restart %s: %s", name, resp.Status)
	}
}

// proxyTo forwards r to the model at base (…/v1) and copies its answer.
func proxyTo(w http.ResponseWriter, r *http.Request, base string) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
