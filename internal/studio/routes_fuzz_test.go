package studio

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzRoute sends arbitrary request targets, parsed the way the studio's
// HTTP server parses them (http.ReadRequest), through the studio's handler,
// and checks that exactly /api/agents/<name>/mcp, for an agent the studio
// has, reaches that agent's route, and that every other path under
// /api/agents/ but the console's (/api/agents/<name>[/action]) is a 404: no cleaning of "..", no decoding of %2F, no
// doubled or trailing slashes, no case folding.
//
// The studio's agents never start (their executable does not exist), so an
// agent's route answers 503 "agent ... is restarting" without forwarding
// anything; a 503 for any other path would mean it was routed to an agent.
// The seeds are in testdata/fuzz/FuzzRoute; run it with
//
//	go test -run '^$' -fuzz '^FuzzRoute$' -fuzztime 30s ./internal/studio
func FuzzRoute(f *testing.F) {
	dir := f.TempDir()
	agents := []string{"abacus", "pack-rat"}
	for _, name := range agents {
		if err := os.MkdirAll(filepath.Join(dir, "agents", name), 0o755); err != nil {
			f.Fatal(err)
		}
		def := `{"name": "` + name + `", "description": "fuzz target"}`
		if err := os.WriteFile(filepath.Join(dir, "agents", name, "agent.json"), []byte(def), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	s, err := Start(context.Background(), &Options{
		Dir:         dir,
		Listen:      "127.0.0.1:0",
		Executable:  filepath.Join(dir, "no-such-switchboard"),
		AgentOutput: &syncBuf{},
		MinBackoff:  time.Hour, // one failed start each, then quiet
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.WaitReady(ctx) // every agent has failed its first start
	h := s.Handler()

	for _, seed := range []struct{ method, target string }{
		{"POST", "/api/agents/abacus/mcp"},
		{"GET", "/api/agents/abacus/../pack-rat/mcp"},
		{"POST", "/api/agents/abacus%2Fmcp"},
		{"POST", "/api/agents/abacus/mcp%2F"},
		{"DELETE", "//api/agents/abacus/mcp"},
		{"POST", "/api/agents//abacus/mcp"},
		{"POST", "/api/agents/ABACUS/mcp"},
		{"POST", "/api/agents/%61bacus/mcp"},
		{"GET", "/api/agents/pack-rat/mcp?x=/../"},
		{"POST", "http://127.0.0.1/api/agents/abacus/mcp"},
	} {
		f.Add(seed.method, seed.target)
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // the server answers 400 before any handler
		}
		req.RemoteAddr = "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		path := req.URL.EscapedPath()
		routed, console := false, false
		for _, name := range agents {
			if path == "/api/agents/"+name+"/mcp" {
				routed = true
			}
			// The console's own routes for an agent (agentpage.go): its
			// page data and its guarded actions, answered by the studio.
			for _, route := range []string{"", "/restart", "/stop", "/start", "/call"} {
				if path == "/api/agents/"+name+route {
					console = true
				}
			}
		}
		if console {
			return
		}
		switch {
		case routed && rec.Code != http.StatusServiceUnavailable:
			t.Fatalf("%s %q (path %q): %d, want the agent's route (503 while it is down): %s", req.Method, target, path, rec.Code, rec.Body)
		case !routed && rec.Code == http.StatusServiceUnavailable:
			t.Fatalf("%s %q (path %q) reached an agent's route: %s", req.Method, target, path, rec.Body)
		case !routed && strings.HasPrefix(path, "/api/agents/") && rec.Code != http.StatusNotFound:
			t.Fatalf("%s %q (path %q): %d, want 404", req.Method, target, path, rec.Code)
		}
	})
}
