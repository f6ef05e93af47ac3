package agentserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/dirlock"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestSecondServerOnADataDirectoryRefused: a second agent on a data
// directory in use fails at New, naming the directory and the holder, and
// takes nothing of the first; once the first closes, the directory is free.
func TestSecondServerOnADataDirectoryRefused(t *testing.T) {
	dir := t.TempDir()
	def := &agentdef.Definition{Name: "packrat", Tools: []string{"packrat"}}
	first, err := New(def, &Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(def, &Options{DataDir: dir})
	if !errors.Is(err, dirlock.ErrLocked) {
		first.Close()
		t.Fatalf("second New on %s: %v, want dirlock.ErrLocked", dir, err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "agent packrat") {
		t.Errorf("the error %q names neither the directory nor its holder", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(def, &Options{DataDir: dir})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}
