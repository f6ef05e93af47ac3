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

// Moved to [testbin.Main]; kept for internal/studio's tests until they import it.
func RunTests(m *testing.M, bin, root *string) { testbin.Main{Bin: bin, Root: root}.Run(m) }

// Moved to [projecttest.New]; kept for internal/studio's tests until they import it.
func Project(t testing.TB, agents ...string) string {
	t.Helper()
	return projecttest.New(t, agents...)
}

// Moved to [proctest.Process]; kept for internal/studio's tests until they import it.
type Process = proctest.Process

// Moved to [proctest.SyncBuffer]; kept for internal/studio's tests until they import it.
type SyncBuffer = proctest.SyncBuffer

// Moved to [proctest.StartProcess]; kept for internal/studio's tests until they import it.
func StartProcess(t testing.TB, dir string, env []string, timeout time.Duration, prefix, bin string, args ...string) *Process {
	t.Helper()
	return proctest.StartProcess(t, dir, env, timeout, prefix, bin, args...)
}

// Moved to [proctest.Alive]; kept for internal/studio's tests until they import it.
func Alive(pid int) bool { return proctest.Alive(pid) }
