package pgdb

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/pgtest"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// TestCheckIdleBesideAParkedRead: an idle connection with a Read parked on
// it, as pgx's background reader leaves one after a slow write, is checked
// at once, not held until the server speaks (which an idle connection's
// never does). With a peek that takes the socket's read lock (RawConn.Read
// instead of Control), CheckIdle waits behind the parked Read, and Acquire
// with it: a keyed packrat call hung to its deadline behind LockKey. The Read is parked by the test
// itself, since pgx parks one only when a write takes more than 15 ms.
func TestCheckIdleBesideAParkedRead(t *testing.T) {
	srv := pgtest.Shared(t)
	dbURL := srv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// No statement timeout, as the lock pools: no bound on a read either.
	pool, err := Open(ctx, dbURL, Options{Schema: "parked", StatementTimeout: -1, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bc, ok := c.Conn().PgConn().Conn().(*boundedConn)
	if !ok {
		t.Fatalf("the pool's connection is a %T, not Open's boundedConn", c.Conn().PgConn().Conn())
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		parkedRead(bc) // parked until the connection is closed below
	}()
	waittest.Until(t, 30*time.Second, "the Read to be parked in the poller", readParked)

	checked := make(chan error, 1)
	go func() { checked <- CheckIdle(c.Conn()) }()
	blocked := false
	select {
	case err := <-checked:
		if err != nil {
			t.Errorf("CheckIdle of a healthy idle connection = %v; want nil", err)
		}
	case <-ctx.Done():
		blocked = true
		t.Error("CheckIdle waited behind the parked Read (its peek took the socket's read lock)")
	}
	// Closing the socket ends the parked Read (and a blocked CheckIdle).
	conn := c.Hijack()
	bc.Conn.Close()
	<-readDone
	if blocked {
		<-checked
	}
	conn.Close(context.Background())
}

// parkedRead is the goroutine readParked looks for: a Read of bc, which
// waits in the poller while the server says nothing.
func parkedRead(bc *boundedConn) {
	var b [1]byte
	bc.Read(b[:])
}

// readParked reports whether parkedRead's goroutine waits in the poller,
// holding the socket's read lock: its stack, as the runtime prints it,
// has both frames.
func readParked() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("pgdb.parkedRead(")) && bytes.Contains(g, []byte("internal/poll.(*pollDesc).wait")) {
			return true
		}
	}
	return false
}
