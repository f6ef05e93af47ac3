package upcmd

import (
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// switchboardBin is the real binary (built once per test run): these tests
// run `switchboard up` as a person does.
var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { mcphttptest.RunTests(m, &switchboardBin, &moduleRoot) }
