package agentserver

import (
	"path/filepath"
	"testing"

	"github.com/switchboard-run/switchboard/internal/testbin"
)

// switchboardBin is the real binary, built once for the process tests.
var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { testbin.Main{Bin: &switchboardBin, Root: &moduleRoot}.Run(m) }

func bundledAgent(name string) string { return filepath.Join(moduleRoot, "agents", name) }
