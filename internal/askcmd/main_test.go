package askcmd

import (
	"os"
	"testing"

	"github.com/switchboard-run/switchboard/internal/testbin"
)

// switchboardBin is the switchboard binary built for the end-to-end tests
// (empty under -short, where they are skipped).
var switchboardBin string

// TestMain builds the binary once for the end-to-end tests, which run it as
// real processes: the studio's agents, and `switchboard ask` itself.
//
// A developer's own model settings would reach the in-process Main tests
// (which read the real environment) and the processes they start: each
// test that wants a model endpoint sets it itself.
func TestMain(m *testing.M) {
	for _, v := range []string{"OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"} {
		os.Unsetenv(v)
	}
	testbin.Main{Bin: &switchboardBin, NoBuildShort: true}.Run(m)
}

// needBinary skips an end-to-end test under -short.
func needBinary(t *testing.T) string {
	t.Helper()
	if switchboardBin == "" {
		t.Skip("end-to-end: skipped with -short")
	}
	return switchboardBin
}
