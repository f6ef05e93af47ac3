package observe

// What a run's model turns cost, from the answers of its asks.
//
// Every ask the proxy forwards answers with the usage of its turn
// (structuredContent.usage; the runtime's Result), and that usage already
// holds the turns of the siblings it asked (nested_usage): each agent's
// ask tool rolls the usage of the asks it delegated into its own. The
// proxy sees those nested asks too, as hops of the same run, so adding up
// every hop would count a nested turn once for itself and once more in
// each ask above it. The run's usage counts each turn once:
//
//   - an ask called from outside the fleet (a client's, depth 0) counts;
//   - an ask an agent made counts only when no ask to that agent one level
//     up the chain (its caller's turn, agent From at depth-1) has reported
//     a usage, which would already hold it. While the top-level ask still
//     runs, the nested asks that have answered are the run's usage so far;
//     when it answers, its usage replaces theirs.
//   - a client's ask answered twice with the same turn (an idempotent
//     replay sends the recorded result again: the same agent, run id and
//     usage) counts once. Nested asks are not matched so: two asks of one
//     run to one sibling share its run id and, with a deterministic model,
//     their usage.

import (
	"encoding/json"
	"slices"
	"unsafe"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

// maxStepUsage bounds the steps kept of one ask: agent.json allows at most
// 100 (agentdef.MaxMaxSteps); an agent that is not ours may claim more.
const maxStepUsage = 100

// turnUsage is the usage members of an ask's structured result.
type turnUsage struct {
	Usage       *studioapi.Usage      `json:"usage"`
	NestedUsage studioapi.Usage       `json:"nested_usage"`
	StepUsage   []studioapi.StepUsage `json:"step_usage"`
}

// usageOf reads an ask's result (a tools/call result) for its usage: the
// structured result's, else the one in _meta under runtime.UsageMetaKey,
// where the ask tool puts it too and where a result without structured
// content can carry it. A member of the wrong type is no usage.
func usageOf(result []byte) turnUsage {
	var res struct {
		Structured turnUsage `json:"structuredContent"`
	}
	if json.Unmarshal(result, &res) != nil {
		res.Structured = turnUsage{}
	}
	if res.Structured.Usage != nil {
		return res.Structured
	}
	var meta struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(result, &meta) != nil {
		return turnUsage{}
	}
	var u studioapi.Usage
	if raw, ok := meta.Meta[runtime.UsageMetaKey]; ok && json.Unmarshal(raw, &u) == nil {
		return turnUsage{Usage: &u}
	}
	return turnUsage{}
}

// steps returns the step usage to keep, bounded.
func (u *turnUsage) steps() []studioapi.StepUsage {
	if len(u.StepUsage) == 0 {
		return nil
	}
	out := slices.Clone(u.StepUsage[:min(len(u.StepUsage), maxStepUsage)])
	// What the model chose is the endpoint's text: shown on the page.
	for i := range out {
		st := &out[i]
		st.FinishReason = Elide(Printable(st.FinishReason), 64)
		if len(st.ToolCalls) > maxStepToolCalls {
			st.ToolCallsLeft += len(st.ToolCalls) - maxStepToolCalls
			st.ToolCalls = st.ToolCalls[:maxStepToolCalls]
		}
		st.ToolCalls = slices.Clone(st.ToolCalls)
		for j, name := range st.ToolCalls {
			st.ToolCalls[j] = Elide(Printable(name), 256)
		}
		if len(st.Truncated) > maxStepToolCalls {
			st.TruncatedLeft += len(st.Truncated) - maxStepToolCalls
			st.Truncated = st.Truncated[:maxStepToolCalls]
		}
		st.Truncated = slices.Clone(st.Truncated)
		for j := range st.Truncated {
			tr := &st.Truncated[j]
			tr.CallID, tr.Tool = Elide(Printable(tr.CallID), 128), Elide(Printable(tr.Tool), 256)
		}
	}
	return out
}

// maxStepToolCalls bounds the tool names kept of one step, as the agent
// does (runtime.maxStepToolCalls).
const maxStepToolCalls = 16

// stepUsageBytes is what steps cost the payload budget.
func stepUsageBytes(steps []studioapi.StepUsage) int {
	n := len(steps) * int(unsafe.Sizeof(studioapi.StepUsage{}))
	for _, st := range steps {
		n += len(st.FinishReason)
		for _, c := range st.ToolCalls {
			n += len(c) + 16
		}
		for _, tr := range st.Truncated {
			n += int(unsafe.Sizeof(tr)) + len(tr.CallID) + len(tr.Tool)
		}
	}
	return n
}

// usage adds up the run's turns, each once (see the top of the file).
func (v *runView) usage() studioapi.Usage {
	type turnKey struct {
		agent string
		depth int
	}
	reported := map[turnKey]bool{}
	for i := range v.calls {
		if c := &v.calls[i]; c.rec.reported {
			reported[turnKey{c.Agent, c.rec.depth}] = true
		}
	}
	type turn struct {
		agent, run string
		usage      studioapi.Usage
	}
	var counted []turn
	var total studioapi.Usage
	for i := range v.calls {
		c := &v.calls[i]
		if !c.rec.reported {
			continue
		}
		if c.From != "" && reported[turnKey{c.From, c.rec.depth - 1}] {
			continue // in its caller's usage
		}
		if c.From == "" {
			t := turn{c.Agent, c.rec.turnRun, c.rec.usage}
			if slices.Contains(counted, t) {
				continue // the same answer again
			}
			counted = append(counted, t)
		}
		total.Add(c.rec.usage)
	}
	return total
}
