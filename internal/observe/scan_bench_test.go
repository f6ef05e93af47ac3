package observe

import (
	"encoding/json"
	"net/http"
	"testing"
)

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// decodeAsBefore is what the sniffer did before msgScan, kept here as the
// baseline: the body appended to a growing buffer as it is written, then
// decoded for the facts and once more for the raw result.
func decodeAsBefore(pieces [][]byte) (json.RawMessage, bool) {
	var buf []byte
	for _, p := range pieces {
		buf = append(buf, p...)
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result *struct {
			IsError    bool `json:"isError"`
			Structured *struct {
				RunID string `json:"run_id"`
			} `json:"structuredContent"`
		} `json:"result"`
		Error *rpcErrorBody `json:"error"`
	}
	if json.Unmarshal(buf, &m) != nil || m.Result == nil {
		return nil, false
	}
	var raw struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(buf, &raw)
	return raw.Result, m.Result.IsError
}

// BenchmarkSniff reads an ask's response, written in 32 KiB pieces as
// the proxy copies it, the way the sniffer does now (scan) and the way it
// did before (decode), for a small answer and a 1 MB one.
//
//	go run ./internal/benchratio/rounds -n 7 -pkg ./internal/observe -bench Sniff \
//		-variants decode,scan | go run ./internal/benchratio -baseline decode
func BenchmarkSniff(b *testing.B) {
	u := tokens(2, 20, 2)
	for _, variant := range []string{"decode", "scan"} {
		b.Run(variant, func(b *testing.B) {
			for _, c := range []struct {
				name string
				size int
			}{{"small", 200}, {"1mb", 1 << 19}} {
				msg := askOfSize(c.size, false, u)
				var pieces [][]byte
				for p := msg; len(p) > 0; p = p[min(32<<10, len(p)):] {
					pieces = append(pieces, p[:min(32<<10, len(p))])
				}
				b.Run(c.name, func(b *testing.B) {
					b.SetBytes(int64(len(msg)))
					b.ReportAllocs()
					for b.Loop() {
						if variant == "decode" {
							if _, isErr := decodeAsBefore(pieces); isErr {
								b.Fatal("isError")
							}
							continue
						}
						sn := &sniffer{ResponseWriter: &discardWriter{h: http.Header{"Content-Type": {"application/json"}}}, wantID: json.RawMessage("7"), parse: true}
						sn.WriteHeader(200)
						for _, p := range pieces {
							sn.Write(p)
						}
						o := &observation{}
						sn.finish(o, b.Context())
						if !sn.found || o.kind != "" {
							b.Fatalf("not found: %q", o.kind)
						}
					}
				})
			}
		})
	}
}
