package mcphttptest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleRoot returns the directory of the main module, from `go env GOMOD`.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" {
		return "", fmt.Errorf("go env GOMOD: not in a module")
	}
	return filepath.Dir(gomod), nil
}

// BuildSwitchboard builds the switchboard command into dir and returns the
// binary's path. Tests run the real binary, as users do.
func BuildSwitchboard(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "switchboard")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/switchboard")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/switchboard: %w\n%s", err, out.Bytes())
	}
	return bin, nil
}
