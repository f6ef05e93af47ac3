package clientcmd

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/peertest"
)

// everythingDir holds the pool's pinned third-party peers, among them
// @modelcontextprotocol/server-everything (npm ci --prefix pool/testdata/peers).
const everythingDir = "../../pool/testdata/peers"

// startEverything runs the real server-everything on a free loopback port
// and returns its MCP URL.
func startEverything(t *testing.T) string {
	t.Helper()
	node := peertest.Node(t)
	peertest.Module(t, everythingDir, "@modelcontextprotocol/server-everything")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(node, "everything.mjs")
	cmd.Dir = everythingDir
	cmd.Env = append(os.Environ(), "PORT=0")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(r).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTENING ")
	if err != nil || !ok {
		t.Fatalf("server-everything did not start: %q, %v", line, err)
	}
	return "http://127.0.0.1:" + port + "/mcp"
}

// TestEveryPoolMethod: switchboard client speaks every method the pool has,
// against the real server-everything: resources (list, templates, read),
// prompts (list, get), completion, with the JSON-lines conventions (one
// answer per id; a list answers every page under its own member; bad params
// are input errors naming what was wrong, nothing sent).
func TestEveryPoolMethod(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips every pool method of switchboard client against server-everything; run it with go test -run '^TestEveryPoolMethod$' ./internal/clientcmd")
	}
	cfg := writeConfig(t, map[string]string{"everything": startEverything(t)})
	s := start(t, "--config", cfg)
	s.send(
		`{"id":"rl","server":"everything","method":"resources/list"}`,
		`{"id":"rt","server":"everything","method":"resources/templates/list"}`,
		`{"id":"pl","server":"everything","method":"prompts/list"}`,
		`{"id":"pg","server":"everything","method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"Paris"}}}`,
		`{"id":"cc","server":"everything","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"completable-prompt"},"argument":{"name":"department","value":"Sa"}}}`,
		`{"id":"bad-read","server":"everything","method":"resources/read","params":{"url":"x"}}`,
		`{"id":"bad-list","server":"everything","method":"prompts/list","params":{"cursor":"c"}}`,
		`{"id":"bad-get","server":"everything","method":"prompts/get","params":{}}`,
	)
	got := s.byID(8)

	list := func(id, member string) []any {
		t.Helper()
		res, _ := got[id]["result"].(map[string]any)
		items, ok := res[member].([]any)
		if !ok || len(items) == 0 {
			t.Fatalf("%s: %v, want a non-empty %q", id, got[id], member)
		}
		return items
	}
	resources := list("rl", "resources")
	list("rt", "resourceTemplates")
	var names []string
	for _, p := range list("pl", "prompts") {
		names = append(names, p.(map[string]any)["name"].(string))
	}
	if !strings.Contains(strings.Join(names, " "), "completable-prompt") {
		t.Errorf("prompts %v, want completable-prompt among them", names)
	}
	if msgs, _ := got["pg"]["result"].(map[string]any)["messages"].([]any); len(msgs) == 0 || !strings.Contains(mustJSON(t, msgs), "Paris") {
		t.Errorf("prompts/get: %v, want messages naming Paris", got["pg"])
	}
	if c, _ := got["cc"]["result"].(map[string]any)["completion"].(map[string]any); c == nil || mustJSON(t, c["values"]) != `["Sales"]` {
		t.Errorf("completion/complete: %v, want the values [\"Sales\"]", got["cc"])
	}
	for id, want := range map[string]string{
		"bad-read": `unknown field "url"`,
		"bad-list": "takes no params",
		"bad-get":  `missing "name"`,
	} {
		e, _ := got[id]["error"].(map[string]any)
		if e == nil || e["kind"] != kindInput || e["code"] != float64(codeInvalidParams) || !strings.Contains(e["message"].(string), want) {
			t.Errorf("%s: %v, want an input error (-32602) saying %s", id, got[id], want)
		}
	}

	// Read the first resource the list named.
	uri := resources[0].(map[string]any)["uri"].(string)
	line, _ := json.Marshal(map[string]any{"id": "rr", "server": "everything", "method": "resources/read", "params": map[string]any{"uri": uri}})
	s.send(string(line))
	rr := s.next()
	if c, _ := rr["result"].(map[string]any)["contents"].([]any); len(c) == 0 || c[0].(map[string]any)["uri"] != uri {
		t.Errorf("resources/read %s: %v, want its contents", uri, rr)
	}
	if code := s.finish(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.stderr)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
