package packrat

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgMain{m})
}

// pgMain stops the shared PostgreSQL server after the tests, before goleak
// looks for goroutines.
type pgMain struct{ m *testing.M }

func (p pgMain) Run() int { return pgtest.Main(p.m) }
