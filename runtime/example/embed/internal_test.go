package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInternalIsOutOfReach proves what this module is for: a program outside
// switchboard's module gets only its public packages. The same one-file
// package, added to this module through a build overlay, builds when it
// imports a public package and is refused by the go command when it imports
// one under internal/.
func TestInternalIsOutOfReach(t *testing.T) {
	build := func(importPath string) (string, error) {
		t.Helper()
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(t.TempDir(), "probe.go")
		code := "package probe\n\nimport _ \"" + importPath + "\"\n"
		if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(wd, "probe", "probe.go"): src}})
		ov := filepath.Join(t.TempDir(), "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("go", "build", "-overlay", ov, "./probe").CombinedOutput()
		return string(out), err
	}
	if out, err := build("github.com/switchboard-run/switchboard/runtime"); err != nil {
		t.Fatalf("a public package does not build here: %v\n%s", err, out)
	}
	out, err := build("github.com/switchboard-run/switchboard/internal/logging")
	if err == nil {
		t.Fatal("this module imported switchboard's internal/logging")
	}
	t.Logf("refused: %s", out)
	if !strings.Contains(out, "use of internal package") {
		t.Errorf("the build failed, but not for reaching internal/:\n%s", out)
	}
}
