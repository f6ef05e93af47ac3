package mcphttptest

import (
	"os"
	"testing"

	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"go.uber.org/goleak"
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

// RunTests is the whole TestMain of a package whose tests run the real
// binary: it builds switchboard into a temporary directory, sets *bin and
// *root (the module root), runs the tests under goleak, removes the
// directory and exits with the tests' code.
func RunTests(m *testing.M, bin, root *string) {
	dir, err := os.MkdirTemp("", "switchboard-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *root, err = ModuleRoot(); err == nil {
		*bin, err = BuildSwitchboard(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}
