package upcmd

import (
	"testing"

	"github.com/switchboard-run/switchboard/internal/testbin"
)

// switchboardBin is the real binary (built once per test run): these tests
// run `switchboard up` as a person does.
var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { testbin.Main{Bin: &switchboardBin, Root: &moduleRoot}.Run(m) }
