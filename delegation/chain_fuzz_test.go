package delegation_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-run/switchboard/delegation"
)

// FuzzChain feeds arbitrary _meta objects, as they arrive on a tools/call,
// to FromMeta and Enter, the check every agent runs before any tool:
//
//   - neither panics, and FromMeta reports an error only for a chain that
//     is present;
//   - what FromMeta accepts is consistent (depth is the number of agents)
//     and holds no agent twice: a chain that already loops is not readable;
//   - Enter never accepts a cycle, a name past MaxAgentNameLen, (the agent already on the chain) or a
//     depth past the limit, refuses only with ErrCycle or ErrDepth, never
//     changes the chain it was given, and what it returns survives Meta and
//     FromMeta unchanged.
//
// The seeds are in testdata/fuzz/FuzzChain; run it with
//
//	go test -run '^$' -fuzz '^FuzzChain$' -fuzztime 30s ./delegation
func FuzzChain(f *testing.F) {
	for _, s := range []struct {
		meta     string
		agent    string
		maxDepth int
	}{
		{`{}`, "oracle", 0},
		{`{"run.switchboard/chain":{"run_id":"r1","agents":["oracle"],"depth":1}}`, "packrat", 4},
		{`{"run.switchboard/chain":{"run_id":"r1","agents":["oracle","packrat"],"depth":2}}`, "oracle", 4},
		{`{"run.switchboard/chain":{"run_id":"r1","agents":["a","b","c","d"],"depth":4}}`, "e", 4},
		{`{"run.switchboard/chain":{"run_id":"r1","agents":["a","a"],"depth":2}}`, "b", 8},
		{`{"run.switchboard/chain":{"run_id":"r1","agents":[],"depth":1}}`, "a", 1},
		{`{"run.switchboard/chain":"oracle"}`, "a", 0},
		{`{"run.switchboard/chain":{"run_id":"r1","agents":["a"],"depth":1,"extra":true}}`, "b", -1},
		{`{"progressToken":7,"run.switchboard/chain":null}`, "a", 2},
	} {
		f.Add([]byte(s.meta), s.agent, s.maxDepth)
	}
	f.Fuzz(func(t *testing.T, raw []byte, agent string, maxDepth int) {
		var meta map[string]any
		if json.Unmarshal(raw, &meta) != nil {
			return // _meta is a JSON object by the time an agent sees it
		}
		if !utf8.ValidString(agent) {
			return // the entering agent's name comes from its agent.json, which allows [a-z0-9-]
		}
		c, found, err := delegation.FromMeta(meta)
		if err != nil {
			if !found {
				t.Fatalf("FromMeta: error %v for a _meta without a chain", err)
			}
			return
		}
		if !found {
			c = delegation.Chain{RunID: "fresh"}
		}
		if c.Depth != len(c.Agents) {
			t.Fatalf("FromMeta accepted depth %d with %d agents", c.Depth, len(c.Agents))
		}
		if hasDuplicate(c.Agents) {
			t.Fatalf("FromMeta accepted a chain that already loops: %q", c.Agents)
		}

		before := slices.Clone(c.Agents)
		entered, err := c.Enter(agent, maxDepth)
		if !slices.Equal(c.Agents, before) {
			t.Fatalf("Enter changed the chain it was given: %q, was %q", c.Agents, before)
		}
		limit := maxDepth
		if limit <= 0 {
			limit = delegation.DefaultMaxDepth
		}
		limit = min(limit, delegation.MaxChainDepth)
		if err != nil {
			if errors.Is(err, delegation.ErrMalformed) {
				if agent != "" && len(agent) <= delegation.MaxAgentNameLen {
					t.Fatalf("Enter(%q) refused a valid name: %v", agent, err)
				}
				return
			}
			if !errors.Is(err, delegation.ErrCycle) && !errors.Is(err, delegation.ErrDepth) {
				t.Fatalf("Enter refused with %v, neither ErrCycle nor ErrDepth", err)
			}
			if errors.Is(err, delegation.ErrCycle) != slices.Contains(c.Agents, agent) {
				t.Fatalf("Enter(%q) on %q: %v", agent, c.Agents, err)
			}
			return
		}
		switch {
		case slices.Contains(c.Agents, agent):
			t.Fatalf("Enter accepted a cycle: %q entering %q", agent, c.Agents)
		case entered.Depth > limit:
			t.Fatalf("Enter accepted depth %d past the limit %d", entered.Depth, limit)
		case entered.Depth != len(entered.Agents) || entered.Depth != c.Depth+1:
			t.Fatalf("Enter returned depth %d with %d agents, from depth %d", entered.Depth, len(entered.Agents), c.Depth)
		case entered.Agents[len(entered.Agents)-1] != agent || entered.RunID != c.RunID:
			t.Fatalf("Enter(%q) on %+v returned %+v", agent, c, entered)
		case hasDuplicate(entered.Agents):
			t.Fatalf("Enter returned a chain that loops: %q", entered.Agents)
		}

		// The chain travels on: the next agent must read back the same.
		wire, err := json.Marshal(entered.Meta())
		if err != nil {
			t.Fatal(err)
		}
		var next map[string]any
		if err := json.Unmarshal(wire, &next); err != nil {
			t.Fatal(err)
		}
		back, found, err := delegation.FromMeta(next)
		if err != nil || !found || back.RunID != entered.RunID || back.Depth != entered.Depth || !slices.Equal(back.Agents, entered.Agents) {
			t.Fatalf("round trip of %+v: %+v, %v, %v", entered, back, found, err)
		}
	})
}

func hasDuplicate(agents []string) bool {
	seen := make(map[string]bool, len(agents))
	for _, a := range agents {
		if seen[a] {
			return true
		}
		seen[a] = true
	}
	return false
}

// FuzzChainCost measures what the chain check costs, where cost is the
// risk: a client picks the chain, and every agent and the studio check it
// before anything else. Whatever the number of entries (up to hundreds of
// thousands, as a 4 MiB body holds) and whatever they are, FromMeta and
// FromMetaJSON look at no more than MaxChainDepth of them, and a chain past
// that depth is refused with ErrDepth or ErrMalformed.
//
//	go test -run '^$' -fuzz '^FuzzChainCost$' -fuzztime 30s ./delegation
func FuzzChainCost(f *testing.F) {
	f.Add(uint32(100000), "a", uint8(0), []byte(`"r"`))
	f.Add(uint32(17), "oracle", uint8(1), []byte(`"r1"`))
	f.Add(uint32(16), "x", uint8(2), []byte(`null`))
	f.Add(uint32(3), "", uint8(3), []byte(`7`))
	f.Fuzz(func(t *testing.T, n uint32, name string, shape uint8, runID []byte) {
		n %= 400000
		agents := make([]any, n)
		for i := range agents {
			switch shape % 4 {
			case 0:
				agents[i] = name // all the same: a loop from entry 2
			case 1:
				agents[i] = name + strconv.Itoa(i) // all distinct
			case 2:
				agents[i] = float64(i) // not names
			case 3:
				agents[i] = strings.Repeat(name, i%200) // growing
			}
		}
		var rid any
		if json.Unmarshal(runID, &rid) != nil {
			rid = string(runID)
		}
		meta := map[string]any{delegation.MetaKey: map[string]any{"run_id": rid, "agents": agents, "depth": float64(n)}}
		looked := -1
		defer delegation.SetTestHookEntries(func(k int) { looked = k })()

		c, found, err := delegation.FromMeta(meta)
		if !found {
			t.Fatal("a chain that is present was not found")
		}
		if looked > delegation.MaxChainDepth {
			t.Fatalf("FromMeta looked at %d entries of %d, more than %d", looked, n, delegation.MaxChainDepth)
		}
		if n > delegation.MaxChainDepth && (err == nil || !errors.Is(err, delegation.ErrDepth) && !errors.Is(err, delegation.ErrMalformed)) {
			t.Fatalf("a chain of %d entries: %v", n, err)
		}
		if err == nil && c.Depth != len(c.Agents) {
			t.Fatalf("depth %d for %d agents", c.Depth, len(c.Agents))
		}

		// The studio's path: the raw JSON, refused by its size first.
		raw, merr := json.Marshal(meta[delegation.MetaKey])
		if merr != nil {
			return
		}
		looked = -1
		_, err = delegation.FromMetaJSON(raw)
		if looked > delegation.MaxChainDepth {
			t.Fatalf("FromMetaJSON looked at %d entries of %d", looked, n)
		}
		if len(raw) > delegation.MaxChainBytes && err == nil {
			t.Fatalf("FromMetaJSON accepted %d bytes", len(raw))
		}
	})
}
