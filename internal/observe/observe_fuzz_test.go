package observe

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// FuzzObserve feeds arbitrary POST bodies to what the studio's observer
// does with every proxied request, before any session check, where cost is
// the risk:
//
//   - everything an observation keeps of the body is bounded (the tool,
//     method, run id, delegating agent and traceparent), and the labels it
//     yields come from the known sets;
//
//   - reading the request costs a bounded number of allocations, whatever
//     the body holds: a chain of a hundred thousand names is refused by its
//     size before it is parsed.
//
//     go test -run '^$' -fuzz '^FuzzObserve$' -fuzztime 30s ./internal/observe
func FuzzObserve(f *testing.F) {
	names := make([]string, 100000)
	for i := range names {
		names[i] = "a"
	}
	long, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": strings.Repeat("n", 1<<20), "_meta": map[string]any{delegation.MetaKey: map[string]any{"run_id": "r", "agents": names, "depth": 0}},
	}})
	f.Add(long)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calculate","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","run.switchboard/chain":{"run_id":"r1","agents":["oracle"],"depth":1}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat("m", 5000) + `"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, rpcErr := mcphttp.ParseMessage(body)
		if rpcErr != nil {
			return
		}
		o := &observation{method: "unknown"}
		allocs := testing.AllocsPerRun(1, func() {
			*o = observation{method: "unknown"}
			o.readRequest(&msg)
		})
		if allocs > 80 {
			t.Fatalf("reading a request of %d bytes made %v allocations", len(body), allocs)
		}
		for what, v := range map[string]struct {
			s   string
			max int
		}{
			"tool":        {o.tool, maxToolName + len("…")},
			"method":      {o.method, maxToolName + len("…")},
			"run id":      {o.runID, delegation.MaxRunIDLen},
			"from":        {o.from, delegation.MaxAgentNameLen},
			"traceparent": {o.traceparent, maxTraceparent},
		} {
			if len(v.s) > v.max {
				t.Fatalf("the observation keeps a %s of %d bytes (at most %d)", what, len(v.s), v.max)
			}
		}
		if l := methodLabel(o.method); l != labelOther && !knownMethods[l] {
			t.Fatalf("method label %q is neither known nor %q", l, labelOther)
		}
	})
}
