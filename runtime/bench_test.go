package runtime_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/agents/abacus"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// BenchmarkTurn runs one builtin-model turn through the retry loop, the
// normalising transport and the context budget ("normalising") and as
// turns ran before them ("plain": builtin's transport directly, one
// attempt per step, tool results and tools as they come, no nested usage
// read), on the success path, where the new code must cost nothing. Cases: "abacus", the
// oracle asking the real abacus toolset over loopback MCP (two steps);
// "no-tools", the model alone (one step). Interleaved, with ratios:
//
//	go run ./internal/benchratio/rounds -n 7 -benchtime 0.5s -pkg ./runtime -bench Turn -variants normalising,plain |
//		go run ./internal/benchratio -baseline plain
func BenchmarkTurn(b *testing.B) {
	as := mcp.NewServer(&mcp.Implementation{Name: "abacus"}, nil)
	if err := abacus.Register(as); err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return as }, nil))
	b.Cleanup(ts.Close)
	cases := []struct {
		name, task string
		servers    []*mcpconfig.Server
	}{
		{"abacus", "what is 6 times 7?", []*mcpconfig.Server{{Name: "abacus", Type: mcpconfig.TypeHTTP, URL: ts.URL}}},
		{"no-tools", "hello", nil},
	}
	for _, variant := range []string{"normalising", "plain"} {
		for _, c := range cases {
			b.Run(variant+"/"+c.name, func(b *testing.B) {
				p := pool.New(nil)
				b.Cleanup(func() { p.Close() })
				def := &agentdef.Definition{Name: "oracle", Model: agentdef.Model{Name: runtime.BuiltinModel},
					MCP: &mcpconfig.Config{Path: "agents/oracle/tools/mcp.json", Servers: c.servers}}
				a, err := runtime.New(def, p, &runtime.Options{Getenv: func(string) string { return "" }})
				if err != nil {
					b.Fatal(err)
				}
				if variant == "plain" {
					runtime.PlainModelPath(a)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := a.Run(b.Context(), c.task, chain); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
