// Package peertest finds the third-party software that tests run against
// (npm packages pinned by a directory's package.json and package-lock.json,
// nginx, Node itself), and says one thing when a piece is missing: a
// developer's run skips the test, naming the command that installs it, and
// CI's run (CI set in the environment, as .ci/run has it) fails it, since
// .ci/run installs every peer and a silent skip there would hide a broken
// install step.
package peertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Missing ends t because a peer is missing: a failure with CI set, a skip
// otherwise. The message should say how to install it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set, so a missing peer is a failure: "+format, args...)
	}
	t.Skipf(format, args...)
}

// Node returns the path of node on PATH, ending t through Missing when
// there is none.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not on PATH (%v): apt-get install -y nodejs", err)
	}
	return node
}

// Module returns the absolute directory of the npm package pkg (such as
// "@modelcontextprotocol/sdk") installed under dir/node_modules, ending t
// through Missing, with the npm ci command that installs dir's pinned
// packages, when it is not there. dir is relative to the test's package
// directory, as a test sees it.
func Module(t testing.TB, dir, pkg string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(abs, "node_modules", filepath.FromSlash(pkg))
	if _, err := os.Stat(filepath.Join(mod, "package.json")); err != nil {
		Missing(t, "npm package %s is not installed in %s (%v); run: npm ci --prefix %s", pkg, dir, err, fromModuleRoot(abs))
	}
	return mod
}

// fromModuleRoot returns dir relative to the nearest directory above it
// that holds a go.mod, the form in which .ci/run and the docs name peer
// directories; dir itself when there is none.
func fromModuleRoot(dir string) string {
	for root := filepath.Dir(dir); ; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			if rel, err := filepath.Rel(root, dir); err == nil {
				return rel
			}
			return dir
		}
		if root == filepath.Dir(root) {
			return dir
		}
	}
}
