package mcphttp_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// BenchmarkParseMessage compares the one-pass scanner with what it replaced
// (json.Unmarshal into a struct of raw members) on the hostile suite's
// body: a tools/call carrying a 1.1 MB delegation chain of 100,000 names.
//
//	go test -run '^$' -bench ParseMessage -benchtime 20x -count 5 ./internal/mcphttp
func BenchmarkParseMessage(b *testing.B) {
	names := make([]string, 100000)
	for i := range names {
		names[i] = fmt.Sprintf("a%05d", i)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": "calculate", "arguments": map[string]any{"expression": "1+1"},
		"_meta": map[string]any{"run.switchboard/chain": map[string]any{"run_id": "r", "agents": names, "depth": 0}},
	}})
	b.Run("scanner", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := mcphttp.ParseMessage(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var m struct {
				JSONRPC, ID, Method json.RawMessage
				Params              *struct {
					Name, Arguments json.RawMessage
					Meta            map[string]json.RawMessage `json:"_meta"`
				}
			}
			if err := json.Unmarshal(body, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
