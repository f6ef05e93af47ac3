package observe

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// fakeCalls drives the delegation log and the call log the way observe
// does, without HTTP, for tests of grouping, badges and bounds.
type fakeCalls struct {
	deleg *Delegations
	calls *Runs
	now   time.Time
}

func newFakeCalls(secrets ...string) *fakeCalls {
	d := NewDelegations()
	return &fakeCalls{deleg: d, calls: NewRuns(logging.NewScrubber(secrets), d), now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
}

type pendingCall struct {
	o   *observation
	d   *studioapi.Delegation
	rec *callRecord
}

// begin starts a tools/call of tool on agent; from and depth describe the
// chain, runID the chain's run (empty for a client's own call).
func (f *fakeCalls) begin(agent, tool, from string, depth int, runID string, args any) *pendingCall {
	f.now = f.now.Add(time.Millisecond)
	raw, _ := json.Marshal(args)
	o := &observation{agent: agent, method: "tools/call", tool: tool, from: from, depth: depth, runID: runID, start: f.now, args: raw, argsDigest: string(raw)}
	d := f.deleg.start(o)
	return &pendingCall{o: o, d: d, rec: f.calls.start(d, o)}
}

// end finishes the call after dur with kind ("" for success) and result.
func (f *fakeCalls) end(p *pendingCall, dur time.Duration, kind, runID string, result any) {
	p.o.duration, p.o.kind = dur, kind
	if runID != "" {
		p.o.runID = runID
	}
	var raw []byte
	if result != nil {
		raw, _ = json.Marshal(result)
	}
	f.deleg.finish(p.d, p.o)
	f.calls.finish(p.rec, p.o, raw)
}

func askResult(answer, runID string) map[string]any {
	return map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": answer}},
		"structuredContent": map[string]any{"answer": answer, "run_id": runID, "steps": 2},
	}
}

func textResult(text string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
}

// TestRunsGroupAcrossProcesses: a client's ask learns its run id only from
// its answer; its delegations carry the id from the start. While it runs
// alone, its first delegation joins it at once; with two asks to the same
// agent at once, the answers sort them out.
func TestRunsGroupAcrossProcesses(t *testing.T) {
	t.Run("one ask", func(t *testing.T) {
		f := newFakeCalls()
		ask := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "sum it"})
		calc := f.begin("abacus", "calculate", "oracle", 1, "R1", map[string]string{"expression": "1+1"})
		runs, _ := f.calls.List(RunFilter{})
		if len(runs) != 1 || runs[0].Delegations != 1 || runs[0].Outcome != studioapi.OutcomeRunning || runs[0].Badge != "running" {
			t.Fatalf("while running: %+v", runs)
		}
		f.end(calc, 2*time.Millisecond, "", "", textResult("2"))
		f.end(ask, 5*time.Millisecond, "", "R1", askResult("It is 2.", "R1"))
		runs, _ = f.calls.List(RunFilter{})
		if len(runs) != 1 || runs[0].ID != "R1" || runs[0].Task != "sum it" || runs[0].Badge != "ok" || runs[0].Steps != 2 {
			t.Fatalf("runs %+v", runs)
		}
		for _, id := range []string{"R1", "call-1"} {
			run, ok := f.calls.Run(id)
			if !ok || run.Answer != "It is 2." || len(run.Hops) != 2 || run.Hops[1].Depth != 1 || run.Hops[1].Text != "2" {
				t.Errorf("Run(%q): %v %+v", id, ok, run)
			}
		}
	})
	t.Run("two asks at once", func(t *testing.T) {
		f := newFakeCalls()
		a := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "first"})
		b := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "second"})
		cb := f.begin("abacus", "calculate", "oracle", 1, "RB", map[string]string{"expression": "2"})
		ca := f.begin("abacus", "calculate", "oracle", 1, "RA", map[string]string{"expression": "1"})
		if runs, _ := f.calls.List(RunFilter{}); len(runs) != 4 {
			t.Fatalf("before the answers: %d runs, want 4 (nothing tells which is whose)", len(runs))
		}
		f.end(ca, time.Millisecond, "", "", textResult("1"))
		f.end(cb, time.Millisecond, "", "", textResult("2"))
		f.end(b, time.Millisecond, "", "RB", askResult("two", "RB"))
		f.end(a, time.Millisecond, "", "RA", askResult("one", "RA"))
		runs, _ := f.calls.List(RunFilter{})
		if len(runs) != 2 {
			t.Fatalf("runs %+v, want 2", runs)
		}
		for _, want := range []struct{ id, task, expr string }{{"RA", "first", "1"}, {"RB", "second", "2"}} {
			run, ok := f.calls.Run(want.id)
			if !ok || run.Task != want.task || len(run.Hops) != 2 || run.Hops[0].Tool != "ask" || !strings.Contains(run.Hops[1].Arguments, `"`+want.expr+`"`) {
				t.Errorf("run %s: %+v", want.id, run)
			}
		}
	})
}

// TestRunBadgesTellTheTruth: a call whose session had expired and whose
// retry succeeded is not a failure; a turn without an answer is not a
// plain ok.
func TestRunBadgesTellTheTruth(t *testing.T) {
	f := newFakeCalls()
	// The pool's retry after a 404: same agent, tool and arguments.
	first := f.begin("abacus", "calculate", "oracle", 1, "R1", map[string]string{"expression": "1"})
	f.end(first, time.Millisecond, "session_not_found", "", nil)
	retry := f.begin("abacus", "calculate", "oracle", 1, "R1", map[string]string{"expression": "1"})
	f.end(retry, time.Millisecond, "", "", textResult("1"))
	run, _ := f.calls.Run("R1")
	var badges []string
	for _, h := range run.Hops {
		badges = append(badges, h.Badge+"/"+h.Tone)
	}
	if got := strings.Join(badges, ", "); got != "session expired · retried/muted, recovered/recovered" {
		t.Errorf("badges %s", got)
	}
	if run.Failures != 0 || run.Recovered != 1 {
		t.Errorf("failures %d recovered %d", run.Failures, run.Recovered)
	}
	if runs, _ := f.calls.List(RunFilter{Outcome: "recovered"}); len(runs) != 1 {
		t.Errorf("outcome=recovered: %d runs", len(runs))
	}
	if runs, _ := f.calls.List(RunFilter{Outcome: "failed"}); len(runs) != 0 {
		t.Errorf("outcome=failed: %d runs, want none", len(runs))
	}

	empty := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "do nothing"})
	f.end(empty, time.Millisecond, "", "R2", askResult("", "R2"))
	runs, _ := f.calls.List(RunFilter{Query: "do nothing"})
	if len(runs) != 1 || runs[0].Badge != "did nothing" || runs[0].Tone != "empty" {
		t.Errorf("an ask without an answer: %+v", runs)
	}

	// A tool's own error (isError) is its refusal, not a failure of the run.
	refused := f.begin("abacus", "calculate", "", 0, "", map[string]string{"expression": "1/"})
	f.end(refused, time.Millisecond, "tool_error", "", map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": "position 2: expected a number"}}})
	if runs, _ := f.calls.List(RunFilter{Outcome: "failed"}); len(runs) != 0 {
		t.Fatalf("a refusal listed as failed: %+v", runs)
	}
	runs, _ = f.calls.List(RunFilter{Limit: 1})
	if len(runs) != 1 || runs[0].Badge != "refused" || runs[0].Tone != "refused" || runs[0].Failures != 0 || runs[0].Refused != 1 {
		t.Fatalf("a refused call's run %+v", runs)
	}
	run, _ = f.calls.Run(runs[0].ID)
	if run.Hops[0].Text != "position 2: expected a number" {
		t.Errorf("what the model read: %q", run.Hops[0].Text)
	}
}

// TestRunsBounded: the call log keeps at most its number of calls and its
// budget of payload bytes, however many calls come, and secrets never enter
// it. (The studio's own bounds, MaxCalls and payloadBudget, are these
// scaled up; TestPageWithTenThousandDelegations fills them.)
func TestRunsBounded(t *testing.T) {
	const keep, budget = 1000, 2 << 20
	f := newFakeCalls("hunter2-secret")
	f.calls = newRunsSized(f.calls.scrub, f.deleg, keep, budget)
	// 2 KiB arguments and results: 4 MiB in all, past the budget.
	mid := strings.Repeat("y", 2<<10)
	big := strings.Repeat("x", maxPayload+100)
	const n = keep + 200
	for i := range n {
		args := map[string]string{"zz": mid, "note": fmt.Sprint(i), "password": "p", "echo": "hunter2-secret"}
		if i == n-1 {
			args["zz"] = big
		}
		c := f.begin("abacus", "calculate", "", 0, "", args)
		f.end(c, time.Millisecond, "", "", textResult(mid))
	}
	huge := f.begin("abacus", "calculate", "", 0, "", map[string]string{"zz": strings.Repeat("z", maxScrubbed)})
	f.end(huge, time.Millisecond, "", "", textResult("1"))
	if run, _ := f.calls.Run(fmt.Sprintf("call-%d", n+1)); !strings.Contains(run.Hops[0].Arguments, "too large to keep") {
		t.Errorf("arguments past maxScrubbed kept as %.100q", run.Hops[0].Arguments)
	}
	l := f.calls
	l.mu.Lock()
	held, groups := 0, map[*runGroup]bool{}
	for _, c := range l.ring {
		if c != nil {
			held++
		}
	}
	for _, g := range l.runs {
		groups[g] = true
	}
	payload := l.payload
	listed := 0
	for _, g := range l.order {
		if !g.gone {
			listed++
		}
	}
	listLen := len(l.order)
	l.mu.Unlock()
	if listed != keep || listLen > 2*keep+1 {
		t.Errorf("the run list holds %d runs in %d entries, want %d in at most %d", listed, listLen, keep, 2*keep+1)
	}
	if held != keep || len(groups) != keep {
		t.Errorf("%d calls in %d runs kept, want %d", held, len(groups), keep)
	}
	if payload > budget {
		t.Errorf("payload %d bytes, budget %d", payload, budget)
	}
	if _, ok := l.Run("call-2"); ok {
		t.Error("the oldest run is still there")
	}
	newest, ok := l.Run(fmt.Sprintf("call-%d", n))
	if !ok || len(newest.Hops) != 1 {
		t.Fatalf("the newest run: %v %+v", ok, newest)
	}
	h := newest.Hops[0]
	if len(h.Arguments) > maxPayload+64 || !strings.Contains(h.Arguments, "bytes more not kept") {
		t.Errorf("arguments of %d bytes kept as %d: %.80q", len(big), len(h.Arguments), h.Arguments)
	}
	if strings.Contains(h.Arguments, "hunter2-secret") || !strings.Contains(h.Arguments, `"password":"[REDACTED]"`) {
		t.Errorf("arguments not redacted: %.200s", h.Arguments)
	}
	runs, next := l.List(RunFilter{Limit: 50})
	if len(runs) != 50 || !next {
		t.Errorf("first page: %d runs, more %v", len(runs), next)
	}
}

func TestElideKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	got := Elide(s, 5)
	if !strings.HasPrefix(got, "éé…") || !strings.Contains(got, "16 bytes more") {
		t.Errorf("elide: %q", got)
	}
	if Elide("short", 10) != "short" {
		t.Error("a short string changed")
	}
}

func TestSeriesLastHour(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 15, 0, time.UTC)
	l := NewSeries([]string{"abacus"})
	l.now = func() time.Time { return now }
	obs := func(at time.Time, method, kind string, d time.Duration) {
		l.observe(&observation{agent: "abacus", method: method, kind: kind, start: at, duration: d})
	}
	for i := range 100 {
		obs(now, "tools/call", "", time.Duration(i+1)*time.Millisecond)
	}
	obs(now, "tools/call", "tool_error", time.Second)
	obs(now, "initialize", "", time.Millisecond)
	obs(now.Add(-2*time.Minute), "tools/call", "session_not_found", time.Millisecond)
	obs(now.Add(-2*time.Hour), "tools/call", "", time.Millisecond) // same slot two hours ago: gone
	obs(now, "tools/call", "", 0)
	l.observe(&observation{agent: "nosuch", method: "tools/call", start: now}) // not an agent: not kept

	s := l.Minutes("abacus")
	if len(s) != SeriesMinutes || !s[len(s)-1].Time.Equal(now.Truncate(time.Minute)) {
		t.Fatalf("%d minutes ending %v", len(s), s[len(s)-1].Time)
	}
	last, earlier := s[len(s)-1], s[len(s)-3]
	if last.Calls != 102 || last.Errors != 1 || last.Initializes != 1 {
		t.Errorf("last minute %+v", last)
	}
	if last.P50MS < 50 || last.P50MS > 50*1.5 || last.P99MS < 99 || last.P95MS > last.P99MS {
		t.Errorf("percentiles %v %v %v", last.P50MS, last.P95MS, last.P99MS)
	}
	if earlier.Calls != 1 || earlier.Expired != 1 || earlier.Errors != 1 {
		t.Errorf("two minutes ago %+v", earlier)
	}
	total := 0
	for _, m := range s {
		total += m.Calls
	}
	if total != 103 {
		t.Errorf("%d calls in the hour, want 103", total)
	}
}
