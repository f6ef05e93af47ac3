package pool_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
)

// TestBodyCutAfterHeadersIsOutcomeUnknown: a call whose tool ran and whose
// answer's status and headers (200) reached the pool before the connection
// ended, with no JSON-RPC response, is outcome_unknown in both eras, never
// an untyped transport error, and is not sent again (issue 24: a call cut
// mid-flight in the 2026-07-28 era). Two cuts: a reset in the middle of the
// body, and a plain close right after the headers.
func TestBodyCutAfterHeadersIsOutcomeUnknown(t *testing.T) {
	cuts := map[string]func(ts *mcptest.Server, w http.ResponseWriter, r *http.Request){
		"reset mid-body": (*mcptest.Server).ResetMidResponse,
		"close after headers": func(ts *mcptest.Server, w http.ResponseWriter, r *http.Request) {
			rec := &headersOnly{header: http.Header{}}
			ts.Forward(rec, r) // the tool runs to completion
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			rc.Flush()
			conn, _, err := rc.Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
		},
	}
	for _, era := range []struct {
		name      string
		stateless bool
		version   string
	}{
		{"2025-11-25", false, pool.Protocol20251125},
		{"2026-07-28", true, pool.Protocol20260728},
	} {
		for name, cut := range cuts {
			t.Run(era.name+"/"+name, func(t *testing.T) {
				ts := mcptest.Start(t, &mcptest.Options{Stateless: era.stateless})
				ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
					if rpc.Method != "tools/call" || rpc.CallID != "cut" {
						return false
					}
					cut(ts, w, r)
					return true
				})
				p := pool.New(nil)
				defer p.Close()
				srv := &pool.Server{Name: "s", URL: ts.URL(), ProtocolVersion: era.version}
				_, err := p.CallTool(t.Context(), srv, echoCall("cut"))
				var pe *pool.Error
				if !errors.As(err, &pe) || pe.Kind != pool.KindOutcomeUnknown || !errors.Is(err, pool.ErrOutcomeUnknown) {
					t.Fatalf("err %v, want a *pool.Error of kind outcome_unknown", err)
				}
				if pe.Retried {
					t.Errorf("retried: %v", err)
				}
				if n := ts.Executions("cut"); n != 1 {
					t.Errorf("the tool ran %d times, want once (never resent)", n)
				}
			})
		}
	}
}

// headersOnly keeps an answer's headers and drops its body.
type headersOnly struct{ header http.Header }

func (h *headersOnly) Header() http.Header         { return h.header }
func (h *headersOnly) WriteHeader(int)             {}
func (h *headersOnly) Write(p []byte) (int, error) { return len(p), nil }
