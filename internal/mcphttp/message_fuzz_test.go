package mcphttp_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// FuzzParseMessage feeds arbitrary bodies to the parse every POST gets
// before anything else, where cost is the risk:
//
//   - on valid JSON it agrees with encoding/json: the method, the id, the
//     tools/call name, arguments and _meta members are what a full decode
//     finds;
//
//   - its allocations do not grow with the body: a constant, plus one
//     map entry per _meta member, plus one per escaped member name or
//     name with bytes that are not UTF-8 (decoded as encoding/json does). A
//     chain of a hundred thousand names or a megabyte tool name costs what
//     a short one does.
//
//     go test -run '^$' -fuzz '^FuzzParseMessage$' -fuzztime 30s ./internal/mcphttp
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"run.switchboard/chain":{"run_id":"r","agents":["a"],"depth":1}}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"x","result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":5}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\"b","_meta":{"k\u0031":"v"}}}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"} x`,
		`  "just a string"  `,
		`{"a":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, rpcErr := mcphttp.ParseMessage(body)
		if json.Valid(body) && rpcErr == nil {
			var ref struct {
				ID     json.RawMessage `json:"id"`
				Method json.RawMessage `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			var top map[string]json.RawMessage
			if json.Unmarshal(body, &top) != nil {
				t.Fatalf("accepted a body that is not an object: %q", body)
			}
			ref.Method, ref.Params = top["method"], top["params"]
			var method string
			if ref.Method != nil {
				json.Unmarshal(ref.Method, &method)
			}
			if m.Method != method {
				t.Fatalf("method %q, encoding/json %q", m.Method, method)
			}
			var params map[string]json.RawMessage
			if json.Unmarshal(ref.Params, &params) == nil {
				var name string
				if json.Unmarshal(params["name"], &name) == nil && m.Tool != name {
					t.Fatalf("tool %q, encoding/json %q", m.Tool, name)
				}
				if !equalJSON(m.Arguments, params["arguments"]) {
					t.Fatalf("arguments %s, encoding/json %s", m.Arguments, params["arguments"])
				}
				var meta map[string]json.RawMessage
				if json.Unmarshal(params["_meta"], &meta) == nil {
					for k, v := range meta {
						if !equalJSON(m.Meta[k], v) {
							t.Fatalf("_meta %q: %s, encoding/json %s", k, m.Meta[k], v)
						}
					}
					if len(m.Meta) != len(meta) {
						t.Fatalf("_meta has %d members, encoding/json %d", len(m.Meta), len(meta))
					}
				}
			}
		}
		allocs := testing.AllocsPerRun(1, func() { mcphttp.ParseMessage(body) })
		if limit := 40 + 3*float64(len(m.Meta)) + float64(bytes.Count(body, []byte(`\`))+invalidUTF8(body)); allocs > limit {
			t.Fatalf("%v allocations for a body of %d bytes with %d _meta members, limit %v", allocs, len(body), len(m.Meta), limit)
		}
	})
}

func equalJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// invalidUTF8 counts the bytes of b that do not begin a valid UTF-8
// sequence: at most one decoded member name each.
func invalidUTF8(b []byte) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			n++
		}
		b = b[size:]
	}
	return n
}
