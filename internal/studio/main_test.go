package studio

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-run/switchboard/internal/testbin"
)

// switchboardBin is the real binary, built once: the studio runs agents as
// child processes of it.
var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { testbin.Main{Bin: &switchboardBin, Root: &moduleRoot}.Run(m) }

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
