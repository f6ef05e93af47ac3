package pool

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/proctest"
)

func stdioServer(mode string) *Server {
	return &Server{Name: "local", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{stdioServerEnv: mode}}
}

// A stdio server inherits only the allow-listed variables and the ones its
// env names: never the runtime's secrets unless named.
func TestStdioEnvironmentIsAnAllowList(t *testing.T) {
	t.Setenv("SWITCHBOARD_TOKEN", "runtime-secret")
	t.Setenv("OPENAI_API_KEY", "sk-runtime")
	t.Setenv("PATH", os.Getenv("PATH"))
	p := newTestPool(t, nil)
	env := func(srv *Server) map[string]string {
		t.Helper()
		res := mustCall(t, p, srv, "env", "e")
		m := map[string]string{}
		for _, kv := range strings.Split(res.Content[0].(*mcp.TextContent).Text, "\n") {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	got := env(stdioServer("1"))
	for _, k := range []string{"SWITCHBOARD_TOKEN", "OPENAI_API_KEY"} {
		if v, ok := got[k]; ok {
			t.Errorf("the stdio server inherited %s=%q", k, v)
		}
	}
	if got["PATH"] != os.Getenv("PATH") || got[stdioServerEnv] != "1" {
		t.Errorf("PATH or the named variable missing: %v", got)
	}
	for k := range got {
		if !strings.HasPrefix(k, "SWITCHBOARD_POOL_TEST") && !slices.Contains(inheritedEnv, k) {
			t.Errorf("variable %s is neither allow-listed nor named", k)
		}
	}
	named := stdioServer("1")
	named.Env["OPENAI_API_KEY"] = "sk-for-this-server"
	if got := env(named); got["OPENAI_API_KEY"] != "sk-for-this-server" {
		t.Errorf("a named variable is not passed: %q", got["OPENAI_API_KEY"])
	}
}

// syncBuffer is a log sink the stderr goroutine and the test share.
type syncBuffer = proctest.SyncBuffer

// A stdio server's stderr goes to the pool's logger with the server's name,
// line by line, long lines cut.
func TestStdioStderrIsLogged(t *testing.T) {
	var logs syncBuffer
	p := newTestPool(t, &Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	mustCall(t, p, stdioServer("1"), "stderr", "warming the cache")
	eventually(t, "the stderr lines in the log", func() bool { return strings.Count(logs.String(), `"msg":"stdio server stderr"`) >= 2 })
	out := logs.String()
	if !strings.Contains(out, `"server":"local","line":"hello warming the cache"`) {
		t.Fatalf("log lacks the line with the server's name:\n%s", out)
	}
	if strings.Contains(out, strings.Repeat("y", maxStderrLine+1)) || !strings.Contains(out, strings.Repeat("y", maxStderrLine)+" [cut]") {
		t.Fatalf("a 5,000-byte line is not cut at %d bytes", maxStderrLine)
	}
}

// A stdio server that dies during a call: the call's error carries the exit
// status and the end of its stderr; the next call gets a new process.
func TestStdioServerExitIsInTheError(t *testing.T) {
	p := newTestPool(t, nil)
	srv := stdioServer("1")
	mustCall(t, p, srv, "echo", "warm")
	_, err := call(context.Background(), p, srv, "exit", "x")
	var xe *exec.ExitError
	var pe *ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != 3 || !errors.As(err, &pe) || !strings.Contains(pe.Stderr, "fatal: disk full") {
		t.Fatalf("want the exit status 3 and the stderr in the error, got %v", err)
	}
	if k := asPoolError(t, err).Kind; k != KindOutcomeUnknown {
		t.Fatalf("kind %v, want outcome_unknown (the tool was running)", k)
	}
	mustCall(t, p, srv, "echo", "after")

	// A server that exits before it answers initialize.
	_, err = call(context.Background(), p, stdioServer("fail-start"), "echo", "y")
	if !errors.As(err, &xe) || xe.ExitCode() != 2 || !errors.As(err, &pe) || !strings.Contains(pe.Stderr, "permission denied") {
		t.Fatalf("a failed start: want exit status 2 and the stderr, got %v", err)
	}
	if !strings.Contains(err.Error(), "exit status 2") || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("message %q", err)
	}
}

// A stdio server runs in its Server.Dir.
func TestStdioServerRunsInDir(t *testing.T) {
	dir := t.TempDir()
	p := newTestPool(t, nil)
	srv := stdioServer("1")
	srv.Dir = dir
	got := mustCall(t, p, srv, "cwd", "c").Content[0].(*mcp.TextContent).Text
	want, _ := filepath.EvalSymlinks(dir)
	if got != want {
		t.Fatalf("the server ran in %q, want %q", got, want)
	}
}
