package interop

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/pool"
)

// TestErasThroughStudio: our own pool calls packrat through `switchboard
// up` in each era (the session era pinned, the sessionless one negotiated
// by server/discover through the studio's proxy), with packrat SIGKILLed
// and restarted by the studio between calls. Every call after the restart
// lands, none twice (packrat's archive), and the pool never retried: in
// the session era the studio kept the session (continuity.go), in the
// sessionless one there was none to lose. It needs no npm peer.
func TestErasThroughStudio(t *testing.T) {
	u := startUp(t, nil)
	for _, era := range []struct{ name, pin, want string }{
		{"2025-11-25", pool.Protocol20251125, pool.Protocol20251125},
		{"2026-07-28", "", pool.Protocol20260728},
	} {
		t.Run(era.name, func(t *testing.T) {
			p := pool.New(&pool.Options{HTTPClient: loopback})
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
			dup := 0
			for id, c := range u.notes(ids) {
				if c != 1 {
					dup++
					t.Errorf("call %s stored %d notes, want 1", id, c)
				}
			}
			st := p.Stats()
			if st.Protocols[era.want] != 1 || st.Retries != 0 || st.Reinitializations != 0 {
				t.Errorf("pool stats: protocols %v, retries %d, reinitializations %d; want one session at %s and no retry",
					st.Protocols, st.Retries, st.Reinitializations, era.want)
			}
			t.Logf("%s | %s era through the studio: %d/%d calls after the restart landed, %d duplicates or losses, %d retries",
				t.Name(), era.name, landed, n, dup, st.Retries)
		})
	}
}
