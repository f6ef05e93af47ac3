package builtin

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the bundled
// agents' MCP sessions, the httptest server and the in-process transport
// all end with their tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
