package pool

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/peertest"
)

// peersDir holds the third-party MCP servers the tests run against, pinned
// in package.json and package-lock.json; CI installs them with
//
//	npm ci --prefix pool/testdata/peers
const peersDir = "testdata/peers"

// needPeers returns node once the npm peers are installed (see
// [peertest.Module]: a skip without them, a failure in CI).
func needPeers(t *testing.T) string {
	t.Helper()
	node := peertest.Node(t)
	peertest.Module(t, peersDir, "@modelcontextprotocol/server-everything")
	return node
}

// everything is a running @modelcontextprotocol/server-everything.
type everything struct {
	t    *testing.T
	node string
	port string
	cmd  *exec.Cmd
}

func startEverything(t *testing.T) *everything {
	ev := &everything{t: t, node: needPeers(t), port: "0"}
	ev.start()
	t.Cleanup(ev.stop)
	return ev
}

func (ev *everything) url() string { return "http://127.0.0.1:" + ev.port + "/mcp" }

func (ev *everything) start() {
	t := ev.t
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(ev.node, "everything.mjs")
	cmd.Dir = peersDir
	cmd.Env = append(os.Environ(), "PORT="+ev.port)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatal(err)
	}
	w.Close()
	ev.cmd = cmd
	// The port line, or EOF when the server failed to start.
	line, err := bufio.NewReader(r).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTENING ")
	if err != nil || !ok {
		ev.stop()
		t.Fatalf("server-everything did not start: %q, %v", line, err)
	}
	ev.port = port
}

func (ev *everything) stop() {
	if ev.cmd == nil {
		return
	}
	ev.cmd.Process.Kill()
	ev.cmd.Wait()
	ev.cmd = nil
}

// TestServerEverythingRecoversAfterRestart: server-everything answers a
// request on a session it does not know with 400 and a JSON-RPC error whose
// id is null. After it restarts, every call on the stale session recovers on
// a new one, as against a spec-compliant server.
func TestServerEverythingRecoversAfterRestart(t *testing.T) {
	ev := startEverything(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	p := New(&Options{Transport: tr})
	defer p.Close()
	for _, version := range []string{Protocol20251125, ""} {
		t.Run("pin="+version, func(t *testing.T) {
			srv := &Server{Name: "everything", URL: ev.url(), ProtocolVersion: version}
			before := p.Stats()
			echo := func(ctx context.Context, msg string) error {
				res, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
				if err != nil {
					return err
				}
				if res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, msg) {
					return fmt.Errorf("echo %q: %+v", msg, res.Content)
				}
				return nil
			}
			if err := echo(context.Background(), "warm"); err != nil {
				t.Fatal(err)
			}
			ev.stop()
			tr.CloseIdleConnections() // a real restart takes longer than noticing a closed connection
			ev.start()

			const n = 30
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					errs <- echo(ctx, fmt.Sprint("after-", i))
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("call after the restart: %v", err)
				}
			}
			st := p.Stats()
			if st.Reinitializations-before.Reinitializations != 1 || st.Dials-before.Dials != 2 {
				t.Fatalf("want one shared re-initialization; stats before %+v after %+v", before, st)
			}
		})
	}
}
