package testbin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A race-built child reports a data race on its stderr and carries on,
// and a test that only looks at the child's answers (or a supervisor that
// restarts a child that died) would never notice. So the children of a
// race-checked test process write their reports to files instead, through
// GORACE's log_path, and CheckRaces fails the test run if any exist.
var (
	raceOnce sync.Once
	raceDir  string
)

// watchRaces points GORACE of every child this process starts afterwards
// (they inherit the environment) at a directory of its own.
func watchRaces() {
	if !raceEnabled {
		return
	}
	raceOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-races-")
		if err != nil {
			return
		}
		raceDir = dir
		gorace := strings.TrimSpace(os.Getenv("GORACE") + " log_path=" + filepath.Join(dir, "race"))
		os.Setenv("GORACE", gorace)
	})
}

// CheckRaces returns an error holding every race report that a child
// started by this test process wrote, and removes the directory. Call it
// once, after the tests ran.
func CheckRaces() error {
	if raceDir == "" {
		return nil
	}
	defer os.RemoveAll(raceDir)
	entries, err := os.ReadDir(raceDir)
	if err != nil {
		return err
	}
	var reports []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(raceDir, e.Name()))
		if err != nil || len(data) == 0 {
			continue
		}
		reports = append(reports, fmt.Sprintf("%s:\n%s", e.Name(), data))
	}
	if len(reports) == 0 {
		return nil
	}
	return errors.New("data races in switchboard processes started by the tests:\n" + strings.Join(reports, "\n"))
}
