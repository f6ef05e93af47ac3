package askcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// TestE2EResumeByHand: `switchboard ask` is interrupted (SIGINT) while
// oracle's model request for step 2 is in flight, after step 1 stored a
// note. The run failed, and --json names it; `ask --resume RUN` goes on
// from its journal: step 1 and its note are not done again, only step 2
// is asked again, and the answer comes. Resumed once more, the run is
// over, and its answer is printed again without asking anything.
func TestE2EResumeByHand(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	const answer = "Noted (packrat)."
	model := newStepModelWith(t, 2, []openai.ChatCompletionMessage{
		{ToolCalls: []openai.ToolCall{call("c1", "packrat__store_note", fmt.Sprintf(`{"text":%q}`, durableNote1))}},
		{Content: answer},
	})
	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted")
	p := newTestPool(t)

	first := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", "note that the launch moved to Friday")
	select {
	case <-model.arrived:
	case <-ctx.Done():
		t.Fatalf("step 2 was never asked; stderr:\n%s", first.stderr)
	}
	if err := first.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(t); code != exitCancelled {
		t.Fatalf("interrupted ask exited %d, want %d\nstderr:\n%s", code, exitCancelled, first.stderr)
	}
	var failed durableJSON
	if err := json.Unmarshal([]byte(first.stdout.String()), &failed); err != nil || failed.RunID == "" {
		t.Fatalf("ask --json printed %q (%v), want the run's id", first.stdout, err)
	}

	// The first attempt may still be ending in oracle (it learns of the
	// interrupt from notifications/cancelled): a resume meanwhile is
	// answered still running, and ask's pool sends it again.
	for i := range 2 {
		again := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", "--resume", failed.RunID)
		code := again.wait(t)
		var out durableJSON
		if err := json.Unmarshal([]byte(again.stdout.String()), &out); err != nil {
			t.Fatalf("resume %d: ask --json printed %q: %v", i+1, again.stdout, err)
		}
		if code != 0 || out.Answer != answer || out.RunID != failed.RunID || !out.Resumed {
			t.Fatalf("resume %d exited %d with %+v, want 0, the answer, run %s resumed\nstderr:\n%s", i+1, code, out, failed.RunID, again.stderr)
		}
		if i == 0 && (out.ReplayedSteps != 1 || out.ReplayedDelegations != 1) {
			t.Errorf("resume 1 replayed %d steps and %d delegations, want 1 and 1", out.ReplayedSteps, out.ReplayedDelegations)
		}
		if i == 1 && !strings.Contains(again.stderr.String(), "is over; its end, from the journal") {
			t.Errorf("resume 2 does not say the run was over:\n%s", again.stderr)
		}
	}
	asked, answered := model.counts()
	if asked[1] != 1 || asked[2] != 2 || answered[1] != 1 || answered[2] != 1 {
		t.Errorf("asked %v and answered %v by step; want step 1 asked once, step 2 twice, each answered once", asked, answered)
	}
	if notes := packratNotes(t, ctx, p, st); len(notes) != 1 || notes[0] != durableNote1 {
		t.Errorf("packrat holds %q, want the one note once", notes)
	}

	unknown := startAsk(t, ctx, dir, "--studio", st.URL(), "--resume", "no-such-run")
	if code := unknown.wait(t); code != exitFailed || !strings.Contains(unknown.stderr.String(), `no run "no-such-run" in its journal`) {
		t.Errorf("--resume of an unknown run exited %d:\n%s", code, unknown.stderr)
	}
}
