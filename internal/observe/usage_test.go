package observe

import (
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

// askResultWithUsage is an ask tool's result as the agent server sends
// it: the runtime's Result as structuredContent, its usage in _meta too.
func askResultWithUsage(answer, runID string, u, nested studioapi.Usage, steps ...studioapi.StepUsage) map[string]any {
	r := askResult(answer, runID)
	sc := r["structuredContent"].(map[string]any)
	sc["usage"], sc["nested_usage"], sc["step_usage"] = u, nested, steps
	r["_meta"] = map[string]any{runtime.UsageMetaKey: u}
	return r
}

func tokens(requests, prompt, completion int) studioapi.Usage {
	return studioapi.Usage{Requests: requests, PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

func plus(us ...studioapi.Usage) studioapi.Usage {
	var t studioapi.Usage
	for _, u := range us {
		t.Add(u)
	}
	return t
}

// TestRunUsageCountsEachTurnOnce: a client asks oracle, which asks
// packrat, which asks abacus; each ask's usage holds the ones below it.
// The run's usage is the sum of the turns that have answered, each turn
// once: the nested asks while the top one runs, then the top one's alone;
// a replayed answer of the client's ask is not counted again. Each hop
// keeps its own usage, and the run its own ask's steps.
func TestRunUsageCountsEachTurnOnce(t *testing.T) {
	f := newFakeCalls()
	abacusU := tokens(1, 300, 20)
	packratOwn := tokens(2, 900, 60)
	packratU := plus(packratOwn, abacusU)
	oracleOwn := studioapi.Usage{Requests: 3, PromptTokens: 2000, CompletionTokens: 150, CachedTokens: 1024, ReasoningTokens: 64, TotalTokens: 2150, CostUSD: 0.0031}
	oracleU := plus(oracleOwn, packratU)
	oracleSteps := []studioapi.StepUsage{
		{Step: 1, RequestBytes: 2100, Attempts: 2, Usage: tokens(1, 900, 50)},
		{Step: 2, RequestBytes: 3800, Attempts: 1, Usage: plus(tokens(2, 1100, 100), studioapi.Usage{CachedTokens: 1024, ReasoningTokens: 64, CostUSD: 0.0031})},
	}

	usage := func(when string, want studioapi.Usage) {
		t.Helper()
		runs, _ := f.calls.List(RunFilter{})
		if len(runs) != 1 {
			t.Fatalf("%s: %d runs, want 1: %+v", when, len(runs), runs)
		}
		if runs[0].Usage != want {
			t.Errorf("%s: run usage\n got %+v\nwant %+v", when, runs[0].Usage, want)
		}
	}

	root := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "file the numbers"})
	packrat := f.begin("packrat", "ask", "oracle", 1, "R1", map[string]string{"task": "store them"})
	abacus := f.begin("abacus", "ask", "packrat", 2, "R1", map[string]string{"task": "add them"})
	calc := f.begin("abacus", "calculate", "abacus", 3, "R1", map[string]string{"expression": "1+2"})
	f.end(calc, time.Millisecond, "", "", textResult("3"))
	usage("before any ask answered", studioapi.Usage{})

	f.end(abacus, 5*time.Millisecond, "", "", askResultWithUsage("3", "R1", abacusU, studioapi.Usage{}))
	usage("abacus answered", abacusU)
	f.end(packrat, 9*time.Millisecond, "", "", askResultWithUsage("stored", "R1", packratU, abacusU))
	usage("packrat answered (holding abacus's)", packratU)
	f.end(root, 20*time.Millisecond, "", "R1", askResultWithUsage("filed", "R1", oracleU, packratU, oracleSteps...))
	usage("oracle answered (holding both)", oracleU)

	// The client's pool sent the ask again with its idempotency key and
	// got the recorded answer: the same turn.
	replay := f.begin("oracle", "ask", "", 0, "R1", map[string]string{"task": "file the numbers"})
	f.end(replay, time.Millisecond, "", "R1", askResultWithUsage("filed", "R1", oracleU, packratU, oracleSteps...))
	usage("after a replay", oracleU)

	run, ok := f.calls.Run("R1")
	if !ok {
		t.Fatal("no run R1")
	}
	if run.Usage != oracleU {
		t.Errorf("the run page's usage %+v, want %+v", run.Usage, oracleU)
	}
	if !reflect.DeepEqual(run.StepUsage, oracleSteps) {
		t.Errorf("the run's steps %+v, want %+v", run.StepUsage, oracleSteps)
	}
	byAgent := map[string]studioapi.Hop{}
	for _, h := range run.Hops {
		if h.Tool == "ask" && h.Agent != "oracle" {
			byAgent[h.Agent] = h
		}
	}
	if h := byAgent["packrat"]; h.Usage != packratU || h.NestedUsage != abacusU {
		t.Errorf("packrat's hop: usage %+v nested %+v, want %+v and %+v", h.Usage, h.NestedUsage, packratU, abacusU)
	}
	if h := byAgent["abacus"]; h.Usage != abacusU || h.NestedUsage != (studioapi.Usage{}) {
		t.Errorf("abacus's hop: usage %+v nested %+v", h.Usage, h.NestedUsage)
	}
	for _, h := range run.Hops {
		if h.Tool == "calculate" && h.Usage != (studioapi.Usage{}) {
			t.Errorf("a tool that is not ask has usage %+v", h.Usage)
		}
	}
}

// TestRunUsageFromTheWire: the usage is read from _meta when the result
// has no structured usage; a usage of the wrong type (a server that is
// not a switchboard agent) is none, and costs the answer nothing.
func TestRunUsageFromTheWire(t *testing.T) {
	u := tokens(1, 12, 3)
	f := newFakeCalls()
	p := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "a"})
	r := askResult("meta only", "R1")
	r["_meta"] = map[string]any{runtime.UsageMetaKey: u}
	f.end(p, time.Millisecond, "", "R1", r)
	if run, _ := f.calls.Run("R1"); run.Usage != u || run.Answer != "meta only" {
		t.Errorf("from _meta: usage %+v answer %q, want %+v", run.Usage, run.Answer, u)
	}

	p = f.begin("other", "ask", "", 0, "", map[string]string{"task": "b"})
	r = askResult("still shown", "R2")
	r["structuredContent"].(map[string]any)["usage"] = "lots"
	f.end(p, time.Millisecond, "", "R2", r)
	if run, _ := f.calls.Run("R2"); run.Usage != (studioapi.Usage{}) || run.Answer != "still shown" {
		t.Errorf("a foreign usage: usage %+v answer %q", run.Usage, run.Answer)
	}
}

// TestRunUsageBounded: an agent claiming more steps than agent.json
// allows has its steps kept to maxStepUsage, and they count against the
// payload budget; trimmed for the budget, a call keeps its usage.
func TestRunUsageBounded(t *testing.T) {
	d := NewDelegations()
	f := &fakeCalls{deleg: d, calls: newRunsSized(logging.NewScrubber(nil), d, 100, 1<<20), now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	// 1,000 steps: under maxScrubbed, past which a result is not read.
	steps := make([]studioapi.StepUsage, 1000)
	for i := range steps {
		steps[i] = studioapi.StepUsage{Step: i + 1, Attempts: 1, Usage: tokens(1, 1, 1)}
	}
	u := tokens(1000, 1000, 1000)
	p := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "a"})
	f.end(p, time.Millisecond, "", "R1", askResultWithUsage("ok", "R1", u, studioapi.Usage{}, steps...))
	run, _ := f.calls.Run("R1")
	if len(run.StepUsage) != maxStepUsage || run.StepUsage[maxStepUsage-1].Step != maxStepUsage || run.Usage != u {
		t.Fatalf("%d steps kept, usage %+v; want %d and %+v", len(run.StepUsage), run.Usage, maxStepUsage, u)
	}
	// Fill the budget with later calls until the first loses its payload.
	for i := 0; i < 50 && !p.rec.trimmed; i++ {
		q := f.begin("abacus", "calculate", "", 0, "", map[string]string{"expression": string(make([]byte, 7<<10))})
		f.end(q, time.Millisecond, "", "", textResult(string(make([]byte, 7<<10))))
	}
	if !p.rec.trimmed {
		t.Fatal("the budget never trimmed the first call")
	}
	run, _ = f.calls.Run("R1")
	if len(run.StepUsage) != 0 || run.Usage != u {
		t.Errorf("trimmed: %d steps, usage %+v; want none and %+v", len(run.StepUsage), run.Usage, u)
	}
}
