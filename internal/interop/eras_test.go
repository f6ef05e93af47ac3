package interop

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/pool"
)

// TestErasThroughStudio: our own pool calls packrat through `switchboard
// up` in each era (the session era pinned, the sessionless one negotiated
// by server/discover through the studio's proxy), with packrat SIGKILLed
// and restarted by the studio between calls, then during a burst. Every
// call sent after a restart lands, none twice (packrat's archive), and the
// pool never re-initialized: in the session era the studio kept the
// session (continuity.go), in the sessionless one there was none to lose.
// It needs no npm peer.
func TestErasThroughStudio(t *testing.T) {
	u := startUp(t, nil)
	for _, era := range []struct{ name, pin, want string }{
		{"2025-11-25", pool.Protocol20251125, pool.Protocol20251125},
		{"2026-07-28", "", pool.Protocol20260728},
	} {
		t.Run(era.name, func(t *testing.T) {
			p := pool.New(&pool.Options{Transport: loopback.Transport})
			t.Cleanup(func() { p.Close() })
			srv := &pool.Server{Name: "packrat", URL: u.url(), ProtocolVersion: era.pin}
			var ids []string
			landed := 0
			store := func(id string) {
				t.Helper()
				ids = append(ids, id)
				res, err := p.CallTool(context.WithoutCancel(t.Context()), srv, &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": id, "tags": []string{id}}})
				if err != nil || res.IsError {
					t.Errorf("store_note %s: %v %+v", id, err, res)
					return
				}
				landed++
			}
			const n = 10
			for i := range n {
				store(fmt.Sprintf("e%sb%d", era.name[:4], i))
			}
			killed := u.kill()
			u.runningAgain(killed)
			landed = 0
			for i := range n {
				store(fmt.Sprintf("e%sa%d", era.name[:4], i))
			}
			after := landed

			// A burst sent at once, packrat SIGKILLed once 5 results came:
			// the calls in flight may fail (outcome unknown, unless the
			// pool's idempotency key recovers them); none may run twice.
			const burst, killAfter = 20, 5
			results := make(chan error, burst)
			for i := range burst {
				id := fmt.Sprintf("e%su%d", era.name[:4], i)
				ids = append(ids, id)
				go func() {
					res, err := p.CallTool(context.WithoutCancel(t.Context()), srv, &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": id, "tags": []string{id}}})
					if err == nil && res.IsError {
						err = fmt.Errorf("tool error: %v", res.Content)
					}
					results <- err
				}()
			}
			burstOK, burstFailed := 0, 0
			for i := range burst {
				if err := <-results; err != nil {
					burstFailed++
					t.Logf("burst call failed: %v", err)
				} else {
					burstOK++
				}
				if i+1 == killAfter {
					killed = u.kill()
				}
			}
			u.runningAgain(killed)
			landed = 0
			for i := range n {
				store(fmt.Sprintf("e%sw%d", era.name[:4], i))
			}

			dup := 0
			burstRan := 0
			for id, c := range u.notes(ids) {
				switch {
				case c > 1:
					dup++
					t.Errorf("call %s stored %d notes, want 1", id, c)
				case c == 0 && !strings.Contains(id, "u"):
					t.Errorf("call %s stored no note", id)
				case c == 1 && strings.Contains(id, "u"):
					burstRan++
				}
			}
			st := p.Stats()
			if st.Protocols[era.want] != 1 || st.Reinitializations != 0 {
				t.Errorf("pool stats: protocols %v, reinitializations %d; want one session at %s, never re-initialized",
					st.Protocols, st.Reinitializations, era.want)
			}
			t.Logf("%s era through the studio: after a kill between calls %d/%d landed; burst of %d at once, SIGKILL after %d results: %d/%d landed, %d failed (%d of all burst calls had run); after that restart %d/%d landed; %d stored twice; pool: %d retries, %d keyed retries, %d interrupted, %d reinitializations",
				era.name, after, n, burst, killAfter, burstOK, burst, burstFailed, burstRan, landed, n, dup, st.Retries, st.KeyedRetries, st.Interrupted, st.Reinitializations)
		})
	}
}
