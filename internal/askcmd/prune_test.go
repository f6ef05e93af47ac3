package askcmd

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPruneLogs: every ask that starts a studio wrote a log and nothing
// removed them. Before a new one, the oldest go so that at most keptLogs
// remain with it; other files are left alone.
func TestPruneLogs(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var names []string
	for i := range keptLogs + 5 {
		name := logName(start.Add(time.Duration(i) * time.Minute))
		names = append(names, name)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(dir, "credentials.json")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := pruneLogs(dir); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "ask-studio-*.log"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	if want := names[len(names)-(keptLogs-1):]; !slices.Equal(left, want) {
		t.Fatalf("left %q, want the newest %d: %q", left, keptLogs-1, want)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another file was touched: %v", err)
	}
}
