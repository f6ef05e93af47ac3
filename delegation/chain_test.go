package delegation_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/delegation"
)

// TestFromMetaJSONBoundsValues: within MaxChainBytes a text can hold
// hundreds of values, and decoding them cost an allocation each (FuzzObserve
// found 305 allocations for 280 one-letter agents, where a chain needs a
// few dozen). Such a text is refused before it is decoded; the longest
// chain an agent accepts still reads.
func TestFromMetaJSONBoundsValues(t *testing.T) {
	chain := func(agents string) []byte {
		return []byte(`{"run_id":"r","agents":` + agents + `,"depth":0}`)
	}
	for name, raw := range map[string][]byte{
		"280 agents":     chain("[" + strings.TrimSuffix(strings.Repeat(`"a",`, 280), ",") + "]"),
		"nested arrays":  chain(strings.Repeat("[", 300) + strings.Repeat("]", 300)),
		"380 objects":    chain("[" + strings.TrimSuffix(strings.Repeat(`{},`, 380), ",") + "]"),
		"17 agents":      chain(`["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]`),
		"commas members": []byte(`{"run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","run_id":"r","agents":[]}`),
	} {
		var err error
		allocs := testing.AllocsPerRun(10, func() { _, err = delegation.FromMetaJSON(raw) })
		if !errors.Is(err, delegation.ErrMalformed) && !errors.Is(err, delegation.ErrDepth) {
			t.Errorf("%s: %v, want it refused", name, err)
		}
		if allocs > 20 {
			t.Errorf("%s: refusing it made %v allocations, want a handful", name, allocs)
		}
	}

	names := make([]string, delegation.MaxChainDepth)
	for i := range names {
		names[i] = `"` + strings.Repeat(string(rune('a'+i)), delegation.MaxAgentNameLen) + `"`
	}
	raw := []byte(`{"run_id":"r,[{\"quoted, [{ text\"","agents":[` + strings.Join(names, ",") + `],"depth":16}`)
	c, err := delegation.FromMetaJSON(raw)
	if err != nil || c.Depth != delegation.MaxChainDepth {
		t.Fatalf("the deepest chain of the longest names, with commas and brackets in a string: %+v %v, want it read", c, err)
	}
}
