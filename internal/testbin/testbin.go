// Package testbin builds the switchboard binary for end-to-end tests, once
// per source tree rather than once per test package.
//
// `go test ./...` runs each package's tests in its own process, so a
// per-package TestMain that runs `go build` links the binary again in every
// package that needs it (five times in this tree). Instead, the binary is
// built into a directory named by a digest of everything that goes into it
// (the module's non-test Go files, embedded assets, go.mod and go.sum, the Go
// version and the -race setting), under an exclusive file lock: the first
// package to ask builds it, every other package of the same run (and of a
// later run on the same unchanged tree) finds it there.
//
// When the tests run under -race the binary is built with -race too, so
// the agent processes an end-to-end test starts are race-checked; their
// race reports go to their stderr, which the tests capture.
package testbin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// staleAfter is how long a cached binary of another source tree is kept
// before a build removes it; a developer switching branches reuses recent
// ones, and /tmp does not fill with old builds.
const staleAfter = 24 * time.Hour

var (
	once    sync.Once
	binPath string
	rootDir string
	binErr  error
)

// Switchboard returns the path of the switchboard binary built from the
// module this test runs in, building it on first use.
func Switchboard() (string, error) {
	once.Do(func() {
		binPath, binErr = build()
		watchRaces()
	})
	return binPath, binErr
}

var (
	plainOnce sync.Once
	plainPath string
	plainErr  error
)

// SwitchboardUnraced is Switchboard built without -race whatever this test
// binary was built with, for tests that measure the processes they start
// (memory, CPU, latency): a race-checked process costs several times either,
// and a ceiling on it would measure the race detector.
func SwitchboardUnraced() (string, error) {
	if !raceEnabled {
		return Switchboard()
	}
	plainOnce.Do(func() { plainPath, plainErr = buildWith(false) })
	return plainPath, plainErr
}

// ModuleRoot returns the directory of the main module, from `go env GOMOD`.
func ModuleRoot() (string, error) {
	if rootDir != "" {
		return rootDir, nil
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not in a module")
	}
	rootDir = filepath.Dir(gomod)
	return rootDir, nil
}

func build() (string, error) { return buildWith(raceEnabled) }

func buildWith(race bool) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	digest, err := treeDigest(root, race)
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", root, err)
	}
	cache := filepath.Join(os.TempDir(), "switchboard-testbin")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	// The lock serialises builds across the test processes of one run:
	// the first builds, the others wait and then find the binary.
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	dir := filepath.Join(cache, digest)
	bin := filepath.Join(dir, "switchboard")
	if _, err := os.Stat(bin); err == nil {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // still in use: not stale
		return bin, nil
	}
	removeStale(cache)
	tmp, err := os.MkdirTemp(cache, "build-")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", filepath.Join(tmp, "switchboard")}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/switchboard")...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out.Bytes())
	}
	// Renaming the finished directory into place makes a half-written
	// binary impossible to find, even if this process dies mid-build.
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return bin, nil
}

// removeStale deletes cached builds not used for staleAfter, and any
// build directory an interrupted build left behind. Called with the lock held.
func removeStale(cache string) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if strings.HasPrefix(e.Name(), "build-") || time.Since(info.ModTime()) > staleAfter {
			os.RemoveAll(filepath.Join(cache, e.Name()))
		}
	}
}

// treeDigest hashes what the binary is built from: every file under root
// except tests, test data, dot-directories, node_modules and nested modules
// (their own go.mod), plus the toolchain and the race setting. It reads a few
// hundred small files, far cheaper than a link.
func treeDigest(root string, race bool) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s race=%t\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, race)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "docs" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", rel)
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}
