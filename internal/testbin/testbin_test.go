package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSwitchboardBuildsOnceAndMatchesRace checks that two calls share one
// build, that the binary runs, and that it carries this test's -race setting.
func TestSwitchboardBuildsOnceAndMatchesRace(t *testing.T) {
	bin, err := Switchboard()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Switchboard()
	if err != nil || again != bin {
		t.Fatalf("second call: %q, %v; want %q", again, err, bin)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Contains(string(out), "-race=true"); got != raceEnabled {
		t.Fatalf("binary built with race=%t, test runs with race=%t:\n%s", got, raceEnabled, out)
	}
}

// TestTreeDigestFollowsSources checks that the digest changes with a source
// file and ignores tests, test data and nested modules.
func TestTreeDigestFollowsSources(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	digest := func() string {
		t.Helper()
		d, err := treeDigest(root, raceEnabled)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	write("go.mod", "module x\n")
	write("a/a.go", "package a\n")
	base := digest()
	for _, rel := range []string{"a/a_test.go", "a/testdata/x.json", "peers/go.mod", "peers/p.go", ".cache/x", "node_modules/m/i.js"} {
		write(rel, "ignored")
	}
	if got := digest(); got != base {
		t.Fatalf("digest changed for files that are not built: %s → %s", base, got)
	}
	write("a/a.go", "package a // changed\n")
	if got := digest(); got == base {
		t.Fatal("digest did not change with a source file")
	}
}

// TestCheckRacesReportsChildReports checks that a report a child wrote
// through GORACE's log_path fails the run, and that none passes.
func TestCheckRacesReportsChildReports(t *testing.T) {
	saved := raceDir
	t.Cleanup(func() { raceDir = saved })
	raceDir = t.TempDir()
	if err := CheckRaces(); err != nil {
		t.Fatalf("no reports: %v", err)
	}
	raceDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(raceDir, "race.1234"), []byte("WARNING: DATA RACE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := CheckRaces()
	if err == nil || !strings.Contains(err.Error(), "WARNING: DATA RACE") || !strings.Contains(err.Error(), "race.1234") {
		t.Fatalf("CheckRaces = %v, want the report", err)
	}
}
