package studio

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// switchboardBin is the real binary, built once: the studio runs agents as
// child processes of it.
var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { mcphttptest.RunTests(m, &switchboardBin, &moduleRoot) }

// project makes a project directory holding copies of the named bundled
// agents (agent.json and tools/), so that tests never write under the
// repository.
func project(t *testing.T, agents ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range agents {
		src := filepath.Join(moduleRoot, "agents", name)
		dst := filepath.Join(dir, "agents", name)
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, path)
			if d.IsDir() {
				if rel != "." && rel != "tools" {
					return filepath.SkipDir
				}
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			if rel != "agent.json" && filepath.Dir(rel) != "tools" {
				return nil // the Go sources
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeAgent writes agents/<name>/agent.json in dir from a bundled agent's,
// changed by edit.
func writeAgent(t *testing.T, dir, from, name string, edit func(map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot, "agents", from, "agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	def := map[string]any{}
	if err := json.Unmarshal(data, &def); err != nil {
		t.Fatal(err)
	}
	def["name"] = name
	edit(def)
	out, _ := json.Marshal(def)
	if err := os.MkdirAll(filepath.Join(dir, "agents", name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agents", name, "agent.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}
