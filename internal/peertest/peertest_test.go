package peertest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// endTB records how a helper ended the test instead of ending it; the
// helper's caller stops at the first end, as t.Fatal's does, through
// runtime.Goexit in a goroutine of its own.
type endTB struct {
	testing.TB
	how, msg string
}

func (e *endTB) Helper()                           {}
func (e *endTB) Fatal(args ...any)                 { e.end("fatal", "%s", fmt.Sprint(args...)) }
func (e *endTB) Fatalf(format string, args ...any) { e.end("fatal", format, args...) }
func (e *endTB) Skipf(format string, args ...any)  { e.end("skip", format, args...) }
func (e *endTB) end(how, format string, args ...any) {
	e.how, e.msg = how, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with an endTB and reports how it ended ("" when it returned).
func run(t *testing.T, f func(testing.TB)) *endTB {
	e := &endTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(e)
	}()
	<-done
	return e
}

func TestModule(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	peers := filepath.Join(root, "a", "peers")
	pkg := filepath.Join(peers, "node_modules", "@scope", "pkg")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}

	var got string
	if e := run(t, func(tb testing.TB) { got = Module(tb, peers, "@scope/pkg") }); e.how != "" {
		t.Fatalf("installed package: the test ended (%s: %s)", e.how, e.msg)
	}
	if got != pkg {
		t.Errorf("Module = %q, want %q", got, pkg)
	}

	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		e := run(t, func(tb testing.TB) { Module(tb, peers, "@scope/other") })
		want := map[string]string{"": "skip", "true": "fatal"}[ci]
		if e.how != want {
			t.Errorf("CI=%q, missing package: the test ended with %q, want %q", ci, e.how, want)
		}
		// The message names the package and the command, with the
		// directory as .ci/run names it.
		for _, s := range []string{"@scope/other", "npm ci --prefix " + filepath.Join("a", "peers")} {
			if !strings.Contains(e.msg, s) {
				t.Errorf("CI=%q: message %q lacks %q", ci, e.msg, s)
			}
		}
	}
}
