// Package projecttest makes project directories for tests: a temporary
// directory with an agents/ folder holding copies of bundled agents, the
// shape `switchboard up` and `switchboard ask` run in.
package projecttest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-run/switchboard/internal/testbin"
)

// New makes a project directory in t's temporary directory holding
// copies of the named bundled agents (agent.json and tools/, not their Go
// sources), so that tests never write under the repository.
func New(t testing.TB, agents ...string) string {
	t.Helper()
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range agents {
		src := filepath.Join(root, "agents", name)
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, path)
			dst := filepath.Join(dir, "agents", name, rel)
			if d.IsDir() {
				if rel != "." && rel != "tools" {
					return filepath.SkipDir
				}
				return os.MkdirAll(dst, 0o755)
			}
			if rel != "agent.json" && filepath.Dir(rel) != "tools" {
				return nil // the Go sources
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
