package mcphttptest

import (
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/testbin"
)

// The names below moved to the packages of their concern (testbin,
// projecttest, proctest). They stay here, as forwarders, only for
// internal/studio's tests, which another branch is splitting up; remove
// this file once those tests import the new homes.

// Deprecated: use [testbin.Main].
func RunTests(m *testing.M, bin, root *string) { testbin.Main{Bin: bin, Root: root}.Run(m) }

// Deprecated: use [projecttest.New].
func Project(t testing.TB, agents ...string) string {
	t.Helper()
	return projecttest.New(t, agents...)
}

// Deprecated: use [proctest.Process].
type Process = proctest.Process

// Deprecated: use [proctest.SyncBuffer].
type SyncBuffer = proctest.SyncBuffer

// Deprecated: use [proctest.StartProcess].
func StartProcess(t testing.TB, dir string, env []string, timeout time.Duration, prefix, bin string, args ...string) *Process {
	t.Helper()
	return proctest.StartProcess(t, dir, env, timeout, prefix, bin, args...)
}

// Deprecated: use [proctest.Alive].
func Alive(pid int) bool { return proctest.Alive(pid) }
