// Package pooltest gives a test outside package pool a pool of its own.
package pooltest

import (
	"testing"

	"github.com/switchboard-run/switchboard/pool"
)

// New returns a pool with opts (nil: the defaults), closed at test cleanup.
// A test that gives the pool a transport of its own closes that
// transport's idle connections in a cleanup it registers before calling
// New, so that it runs after the pool's Close (cleanups run last first).
func New(t testing.TB, opts *pool.Options) *pool.Pool {
	t.Helper()
	p := pool.New(opts)
	t.Cleanup(func() { p.Close() })
	return p
}
