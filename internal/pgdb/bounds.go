package pgdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The bounds on a connection whose database stopped answering. Without
// them a statement sent across a partition waits as long as the kernel
// retransmits (minutes) and the call that sent it until its own deadline,
// whatever pgx does: pgx bounds nothing but what the caller's context does.
// There are two ways a database stops answering, and one bound for each:
//
//   - The peer is gone at the TCP level (a host or link down, a partition):
//     keepalive probes and TCP_USER_TIMEOUT make the kernel give up on the
//     connection after DeadAfter, with or without data unacknowledged.
//   - The connection is alive but no answer comes (a proxy or forwarder in
//     the way has stopped passing bytes, a server wedged): every read the
//     driver makes while it waits for an answer gets a deadline, the
//     statement timeout plus answerMargin, and past it the read fails with
//     ErrNoAnswer and pgx closes the connection. PostgreSQL's own
//     statement_timeout (the same value, on the server) ends a slow
//     statement first, with a definite answer (SQLSTATE 57014, the
//     statement rolled back); the client's deadline fires only when that
//     answer cannot arrive.
//
// Either way the statement's outcome is unknown to the caller (it was sent,
// no answer came): the error is not pgconn.SafeToRetry, and NotRun says
// false, so no caller retries it blindly.

// Defaults of Options.StatementTimeout and Options.DeadAfter.
const (
	DefaultStatementTimeout = 15 * time.Second
	DefaultDeadAfter        = 10 * time.Second
)

// answerMargin is how much longer than the server's statement_timeout the
// client waits for an answer: enough for the server's cancellation to
// arrive, so that a slow statement ends with its definite error rather than
// an unknown outcome.
const answerMargin = 2 * time.Second

// minDeadAfter is the smallest DeadAfter: keepalive's intervals are whole
// seconds, and DeadAfter is split into four of them (dialer).
const minDeadAfter = 4 * time.Second

// ErrNoAnswer: the database did not answer a statement within the
// statement timeout plus a margin, on a connection that is then closed.
// Whether the statement ran is unknown. It is a net.Error whose Timeout is
// true, as pgx expects of a read deadline.
var ErrNoAnswer error = &noAnswerError{}

type noAnswerError struct{}

func (*noAnswerError) Error() string {
	return "the database did not answer within the statement timeout (the connection is closed; whether the statement ran is unknown)"
}
func (*noAnswerError) Timeout() bool   { return true }
func (*noAnswerError) Temporary() bool { return false }

// dialer returns the DialFunc of every connection Open makes: TCP
// keepalive and TCP_USER_TIMEOUT bounding a dead peer to deadAfter, and
// reads bounded to answer (none when answer is 0).
func dialer(connectTimeout, deadAfter, answer time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	// Whole seconds, rounded down (the kernel's unit; Go would round
	// up): Idle + Count×Interval ≤ deadAfter.
	step := max((deadAfter / 4).Truncate(time.Second), time.Second)
	d := &net.Dialer{
		Timeout: connectTimeout,
		// The kernel probes an idle connection after Idle, every
		// Interval, Count times; TCP_USER_TIMEOUT caps the whole at
		// deadAfter.
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: step, Interval: step, Count: 3},
		Control: func(network, address string, c syscall.RawConn) error {
			return setUserTimeout(c, deadAfter)
		},
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &boundedConn{Conn: c, answer: answer}, nil
	}
}

// A boundedConn bounds every read to answer (none if 0), within any deadline the driver
// sets itself (pgx sets one to carry a context's cancellation).
//
// A read mostly blocks only while the driver waits for the server, but not
// always: when a write takes longer than 15 ms (a loaded machine), pgx
// starts a background reader (pgconn's bgreader, against a write/read
// deadlock), and its Stop only ends it after the read in progress returns.
// The connection then goes back to the pool idle with a goroutine parked in
// Read, holding the socket's read lock until the server sends something,
// which on an idle connection it never does. CheckIdle must not queue
// behind such a Read (see there).
type boundedConn struct {
	net.Conn
	answer time.Duration

	mu       sync.Mutex // protects following
	deadline time.Time  // the read deadline the driver set; zero: none
}

func (c *boundedConn) Read(p []byte) (int, error) {
	if c.answer <= 0 {
		return c.Conn.Read(p)
	}
	c.mu.Lock()
	own := time.Now().Add(c.answer)
	d := c.deadline
	if d.IsZero() || own.Before(d) {
		d = own
	}
	err := c.Conn.SetReadDeadline(d)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// Ours only if the driver's deadline (which it may have moved
		// during the read, to cancel it) has not passed.
		c.mu.Lock()
		now := time.Now()
		theirs := !c.deadline.IsZero() && !now.Before(c.deadline)
		c.mu.Unlock()
		if !theirs && !now.Before(own) {
			return n, ErrNoAnswer
		}
	}
	return n, err
}

func (c *boundedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *boundedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// NetConn returns the connection c bounds (tests read its socket options).
func (c *boundedConn) NetConn() net.Conn { return c.Conn }

// ErrGone: the server closed an idle connection, or spoke on it unasked
// (PostgreSQL's FATAL on shutdown, "terminating connection due to
// administrator command"), before a statement was sent on it.
var ErrGone = errors.New("the database closed the idle connection")

// CheckIdle looks, without blocking and without sending anything, for a
// sign that the server has ended c's session while it sat idle: bytes
// waiting (a FATAL notice) or the end of the stream. A statement sent on
// such a connection would fail with an outcome pgx cannot tell from a
// statement cut off mid-run; discarded first, it never runs there. One
// recv(MSG_PEEK|MSG_DONTWAIT). It returns nil for a connection it cannot
// look into (not one of Open's, or under TLS, whose records the server
// may send unasked).
//
// An idle connection may have a Read in progress: pgx's background reader
// left parked on it (boundedConn). The peek does not take the socket's
// read lock (peek), so it does not wait for that Read, which never returns
// while the server stays quiet; a peek that did wait held the caller's
// Acquire with it, which ignores its context there (seen as a keyed
// packrat call hung to its 60 s deadline behind the ledger's LockKey,
// internal/faultsuite TestReplicaHosts).
func CheckIdle(c *pgx.Conn) error {
	bc, ok := c.PgConn().Conn().(*boundedConn)
	if !ok {
		return nil
	}
	sc, ok := bc.Conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	n, rerr, err := peek(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrGone, err)
	}
	switch {
	case n < 0, errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EINTR):
		return nil // nothing waiting, or no way to look
	case rerr != nil:
		return fmt.Errorf("%w: %w", ErrGone, rerr)
	case n == 0:
		return fmt.Errorf("%w: end of stream", ErrGone)
	}
	return fmt.Errorf("%w: the server sent a message unasked", ErrGone)
}
