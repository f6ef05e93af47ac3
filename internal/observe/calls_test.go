package observe

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/runtime"
)

// turnResult is an ask's result carrying res as its structuredContent, as
// the agent server writes it.
func turnResult(t *testing.T, res runtime.Result) map[string]any {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var sc map[string]any
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": res.Answer}},
		"structuredContent": sc,
		"isError":           res.Status != runtime.StatusAnswered,
	}
}

// TestRunShowsEveryHop: the calls an ask's turn reports are in the run,
// each once: the one to a sibling that passed the proxy is marked proxied
// (it is a hop already), those to servers the agent's tools/mcp.json
// names (which the proxy never sees) count as delegations, with their
// repaired names, retries and refusals; the model steps' spans and the
// run's model and tool time come from step_usage.
func TestRunShowsEveryHop(t *testing.T) {
	f := newFakeCalls()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ask := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "look it up"})
	sib := f.begin("abacus", "calculate", "oracle", 1, "R1", map[string]string{"expression": "1+1"})
	f.end(sib, time.Millisecond, "", "", textResult("2"))
	ev := func(id, server, tool string, outcome delegation.Outcome, ms float64) delegation.Event {
		return delegation.Event{Phase: delegation.PhaseFinish, CallID: id, Agent: server, Tool: tool, Outcome: outcome, DurationMS: ms, Time: t0.Add(time.Second)}
	}
	fetchRetry := ev("c3", "fetch", "get", delegation.OutcomeOK, 30)
	fetchRetry.Retried, fetchRetry.Recovered = true, true
	res := runtime.Result{
		Agent: "oracle", RunID: "R1", Answer: "", Status: runtime.StatusNotAnswered, Reason: "not answered: the model refused",
		Steps: 2,
		Delegations: []delegation.Event{
			ev("c1", "abacus", "calculate", delegation.OutcomeOK, 1),
			ev("c2", "github", "search_issues", delegation.OutcomeOK, 20),
			fetchRetry,
			ev("c4", "github", "create_issue", delegation.OutcomeToolError, 5),
		},
		NameRepairs: []runtime.NameRepair{{Step: 1, CallID: "c2", From: "github.search_issues", To: "github__search_issues"}},
		StepUsage: []runtime.StepUsage{
			{Step: 1, Attempts: 1, Start: t0, DurationMS: 400, FinishReason: "tool_calls", ToolCalls: []string{"abacus__calculate", "github.search_issues"}},
			{Step: 2, Attempts: 1, Start: t0.Add(time.Second), DurationMS: 100, FinishReason: "stop"},
		},
	}
	f.end(ask, time.Second, "tool_error", "R1", turnResult(t, res))

	run, ok := f.calls.Run("R1")
	if !ok {
		t.Fatal("no run R1")
	}
	if run.Badge != "not answered" || run.Tone != "notanswered" {
		t.Errorf("the run's badge %s/%s, want not answered/notanswered", run.Badge, run.Tone)
	}
	// One sibling hop and three calls the proxy did not see.
	if run.Delegations != 4 || run.Failures != 0 || run.Refused != 1 || run.Recovered != 1 {
		t.Errorf("delegations %d failures %d refused %d recovered %d, want 4 0 1 1", run.Delegations, run.Failures, run.Refused, run.Recovered)
	}
	if run.ModelMS != 500 || run.ToolMS != 56 {
		t.Errorf("model %v ms, tool %v ms, want 500 and 56", run.ModelMS, run.ToolMS)
	}
	root := run.Hops[0]
	if root.Reason != res.Reason || len(root.Calls) != 4 {
		t.Fatalf("the ask's hop: reason %q, calls %+v", root.Reason, root.Calls)
	}
	var got []string
	for _, c := range root.Calls {
		label, _ := CallBadge(c)
		got = append(got, strings.Join([]string{c.Server, c.Tool, label, c.RepairedFrom}, "/"))
		if c.Start.IsZero() || !c.Start.Before(t0.Add(time.Second)) {
			t.Errorf("call %s.%s starts %v, want its end less its duration", c.Server, c.Tool, c.Start)
		}
	}
	if s := strings.Join(got, " "); s != "abacus/calculate/ok/ github/search_issues/ok/github.search_issues fetch/get/recovered/ github/create_issue/refused/" {
		t.Errorf("calls %s", s)
	}
	if !root.Calls[0].Proxied || root.Calls[1].Proxied {
		t.Errorf("proxied: %v %v, want only the sibling's", root.Calls[0].Proxied, root.Calls[1].Proxied)
	}
	if len(run.StepUsage) != 2 || run.StepUsage[0].FinishReason != "tool_calls" || len(run.StepUsage[0].ToolCalls) != 2 {
		t.Errorf("steps %+v", run.StepUsage)
	}
	// `switchboard status` reads the same words from the delegation log.
	for _, d := range f.deleg.Recent(10) {
		if d.Tool == "ask" {
			if label, _ := Badge(d); label != "not answered" {
				t.Errorf("the delegation log's badge of the ask: %q", label)
			}
		}
	}
}

// TestBadgesOfEachEnding: each way a call ends has its own badge.
func TestBadgesOfEachEnding(t *testing.T) {
	f := newFakeCalls()
	for _, c := range []struct {
		name        string
		kind        string
		result      map[string]any
		badge, tone string
	}{
		{"answered", "", turnResult(t, runtime.Result{Answer: "4", Status: runtime.StatusAnswered}), "ok", "ok"},
		{"not answered", "tool_error", turnResult(t, runtime.Result{Status: runtime.StatusNotAnswered, Reason: "not answered: refused"}), "not answered", "notanswered"},
		{"delegation failed", "tool_error", turnResult(t, runtime.Result{Answer: "half", Status: runtime.StatusDelegationFailed}), "delegation failed", "warn"},
		{"unavailable", "tool_error", turnResult(t, runtime.Result{Status: runtime.StatusUnavailable}), "unavailable", "unavailable"},
		{"failed", "tool_error", turnResult(t, runtime.Result{Status: runtime.StatusFailed}), "failed", "bad"},
		{"declined", "tool_error", map[string]any{"isError": true, "content": []any{}, "structuredContent": map[string]any{"action": "decline"}}, "declined", "declined"},
		{"refused", "tool_error", map[string]any{"isError": true, "content": []any{}}, "refused", "refused"},
		{"an error", "transport", nil, "transport", "bad"},
	} {
		tool := "ask"
		if c.name == "declined" || c.name == "refused" || c.name == "an error" {
			tool = "delete_notes"
		}
		args := map[string]string{"task": c.name}
		p := f.begin("packrat", tool, "", 0, "", args)
		f.end(p, time.Millisecond, c.kind, "", c.result)
		d := f.deleg.Recent(1)[0]
		if label, tone := Badge(d); label != c.badge || tone != c.tone {
			t.Errorf("%s: badge %s/%s, want %s/%s", c.name, label, tone, c.badge, c.tone)
		}
	}
}
