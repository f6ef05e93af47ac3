package studio

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/dirlock"
	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// TestSecondStudioOnAProjectRefused: a second studio on a project whose
// studio runs fails at Start, naming the first and where it serves, and
// starts no agent; once the first closes, the project can be served again.
func TestSecondStudioOnAProjectRefused(t *testing.T) {
	dir := projecttest.New(t)
	first, err := Start(t.Context(), &Options{Dir: dir, Listen: "127.0.0.1:0", Executable: switchboardBin})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(t.Context(), &Options{Dir: dir, Listen: "127.0.0.1:0", Executable: switchboardBin})
	if !errors.Is(err, dirlock.ErrLocked) {
		first.Close()
		t.Fatalf("second studio: %v, want dirlock.ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "studio at "+first.URL()) {
		t.Errorf("the error %q does not say where the first studio serves (%s)", err, first.URL())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Start(t.Context(), &Options{Dir: dir, Listen: "127.0.0.1:0", Executable: switchboardBin})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}
