package pgdb_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"

	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/pgtest"
)

// testGuard bounds a test's wait for the bound under test: not a timing
// claim, only the line past which "the bound did not hold" is the verdict
// rather than a hung test.
const testGuard = 60 * time.Second

// A blackhole forwards TCP connections to a target until cut; from then on
// it reads and discards what either side sends (the kernel still
// acknowledges it) and never closes a connection: a middlebox that stopped
// passing bytes, which no TCP-level check notices.
type blackhole struct {
	ln   net.Listener
	cut  atomic.Bool
	wg   sync.WaitGroup
	mu   sync.Mutex // protects conns
	conn []net.Conn
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln}
	b.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			b.mu.Lock()
			b.conn = append(b.conn, c, up)
			b.mu.Unlock()
			b.wg.Go(func() { b.pipe(up, c) })
			b.wg.Go(func() { b.pipe(c, up) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for _, c := range b.conn {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *blackhole) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && !b.cut.Load() {
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
			}
			return
		}
	}
}

// via is dbURL with its host and port replaced by addr.
func via(t *testing.T, dbURL, addr string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// TestNoAnswerEndsTheStatement: a connection through a middlebox that has
// stopped passing bytes (TCP itself healthy) does not hold a statement to
// the caller's deadline: past the statement timeout plus a margin the
// statement fails with ErrNoAnswer, and its outcome is unknown (NotRun is
// false: no caller may run it again on that ground).
func TestNoAnswerEndsTheStatement(t *testing.T) {
	srv := pgtest.Shared(t)
	dbURL := srv.NewDatabase(t)
	bh := newBlackhole(t, "127.0.0.1:"+strconv.Itoa(srv.Port()))
	ctx, cancel := context.WithTimeout(context.Background(), testGuard)
	defer cancel()
	pool, err := pgdb.Open(ctx, via(t, dbURL, bh.ln.Addr().String()), pgdb.Options{Schema: "bounds", StatementTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Acquired before the cut: the pool's own liveness ping (of a
	// connection idle for a second) would otherwise meet the cut first.
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	bh.cut.Store(true)
	_, err = c.Exec(ctx, `SELECT 1`)
	switch {
	case err == nil:
		t.Fatal("a statement was answered through a cut connection")
	case ctx.Err() != nil:
		t.Fatalf("the statement was held to the test's guard (%v): %v", testGuard, err)
	case !errors.Is(err, pgdb.ErrNoAnswer):
		t.Fatalf("err = %v; want ErrNoAnswer", err)
	case pgdb.NotRun(err), pgconn.SafeToRetry(err):
		t.Fatalf("NotRun/SafeToRetry(%v) = true for a statement sent and not answered", err)
	}
}

// TestStatementTimeoutOnTheServer: a slow statement is ended by the server
// (statement_timeout, SQLSTATE 57014) before the client's own bound, with
// a definite answer, and the connection stays usable.
func TestStatementTimeoutOnTheServer(t *testing.T) {
	dbURL := pgtest.Shared(t).NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), testGuard)
	defer cancel()
	pool, err := pgdb.Open(ctx, dbURL, pgdb.Options{Schema: "bounds", StatementTimeout: time.Second, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, `SELECT pg_sleep(30)`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("err = %v; want query_canceled (57014) from statement_timeout", err)
	}
	if errors.Is(err, pgdb.ErrNoAnswer) || pgdb.NotRun(err) {
		t.Fatalf("err = %v: a definite answer, not ErrNoAnswer nor NotRun", err)
	}
	if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatalf("the connection after a statement timeout: %v", err)
	}
	// No bound: the wait is the caller's (an advisory lock under its own
	// deadline).
	free, err := pgdb.Open(ctx, dbURL, pgdb.Options{Schema: "bounds", StatementTimeout: -1, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer free.Close()
	var st string
	if err := free.QueryRow(ctx, `SHOW statement_timeout`).Scan(&st); err != nil || st != "0" {
		t.Fatalf("statement_timeout %q, %v; want 0 (none)", st, err)
	}
}

// TestKernelBoundsOnTheSocket: every connection's socket has keepalive on
// and TCP_USER_TIMEOUT set to DeadAfter, so that a peer gone at the TCP
// level (a partition) ends the connection after DeadAfter, whether it is
// idle or has a statement unacknowledged. (That the kernel then keeps its
// word is the kernel's; the replica rows of the fault suite partition a
// real link.)
func TestKernelBoundsOnTheSocket(t *testing.T) {
	dbURL := pgtest.Shared(t).NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), testGuard)
	defer cancel()
	pool, err := pgdb.Open(ctx, dbURL, pgdb.Options{Schema: "bounds", DeadAfter: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	nc := c.Conn().PgConn().Conn()
	sc, ok := nc.(interface {
		NetConn() net.Conn
	})
	if !ok {
		t.Fatalf("connection %T: want the bounded connection", nc)
	}
	raw, err := sc.NetConn().(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ut, ka, idle int
	var serr error
	raw.Control(func(fd uintptr) {
		if ut, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); serr != nil {
			return
		}
		if ka, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE); serr != nil {
			return
		}
		idle, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
	})
	if serr != nil {
		t.Fatal(serr)
	}
	if ut != 8000 || ka != 1 || idle != 2 {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d, TCP_KEEPIDLE %d s; want 8000, 1, 2", ut, ka, idle)
	}
}

// TestRetryWaitsOutARestart: a statement that cannot get a connection
// because PostgreSQL is down (refused: provably not run) is tried again
// until the server is back; the one that ran is
// answered.
func TestRetryWaitsOutARestart(t *testing.T) {
	// What is tested is that Retry waits, not how fast this machine
	// restarts PostgreSQL: the wait is the test's guard, not 10 s.
	defer pgdb.SetRestartWait(3 * testGuard)()
	srv := pgtest.Start(t)
	dbURL := srv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testGuard)
	defer cancel()
	pool, err := pgdb.Open(ctx, dbURL, pgdb.Options{Schema: "bounds"})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	srv.Stop()
	refused := make(chan struct{})
	var (
		once     sync.Once
		attempts int
		errs     []error
	)
	done := make(chan error, 1)
	go func() {
		done <- pgdb.Retry(ctx, nil, func(ctx context.Context) error {
			attempts++
			_, err := pool.Exec(ctx, `SELECT 1`)
			if err != nil {
				errs = append(errs, err)
				once.Do(func() { close(refused) })
			}
			return err
		})
	}()
	select {
	case <-refused:
	case err := <-done:
		t.Fatalf("Retry returned %v with the server down", err)
	}
	srv.Restart(t)
	if err := <-done; err != nil {
		t.Fatalf("Retry: %v after %d attempts (first error %v)", err, attempts, errs[0])
	}
	if !pgdb.NotRun(errs[0]) {
		t.Fatalf("NotRun(%v) = false for a statement that found the server down", errs[0])
	}
}
