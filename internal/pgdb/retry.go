package pgdb

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A replica waits out a short database restart, as a user expects of it,
// but only for a statement that provably did not run: PostgreSQL restarted
// refuses connections for a moment (or answers "the database system is
// starting up"), and a statement that could not get a connection never
// reached the server. Anything else (the connection lost after the
// statement was sent, ErrNoAnswer) is not retried: its outcome is unknown,
// and a second execution is the one thing the ledger must never cause.
//
// The same rule database/sql applies to driver.ErrBadConn ("should NOT be
// returned if there's a possibility that the database server might have
// performed the operation"), with the wait bounded by RestartWait.

// RestartWait bounds how long Retry waits for the database to come back.
const RestartWait = 10 * time.Second

// restartWait is RestartWait, but for tests that must not depend on how
// fast a loaded machine restarts PostgreSQL (export_test.go).
var restartWait = RestartWait

// Backoff between Retry's attempts: from retryFirst, doubling, at most
// retryMax.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = time.Second
)

// SQLSTATEs of a server that refuses a connection but will take one soon
// (Appendix A, class 57): cannot_connect_now (starting up, shutting down,
// in recovery), admin_shutdown and crash_shutdown as a connection's
// startup answer. In a ConnectError they come before any statement.
var restartCodes = map[string]bool{"57P03": true, "57P01": true, "57P02": true}

// NotRun reports whether err provably happened before a statement reached
// the database, so that running it again cannot run it twice: a connection
// that could not be made (refused, or refused by a server restarting), or
// an error pgconn marks SafeToRetry (nothing was sent). A context's end is
// not among them: the caller gave up. Conservatively false otherwise.
func NotRun(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return restartCodes[pe.Code]
		}
		// Refused, reset or timed out at connect: the server was not
		// there to run anything. (A TLS refusal lands here too and is
		// tried until RestartWait: slow, but never a second execution.)
		return true
	}
	return pgconn.SafeToRetry(err)
}

// Retry runs f until it returns nil or an error for which retryable is
// false, waiting between attempts (with backoff) at most RestartWait in
// all, and never past ctx. retryable nil means NotRun. It returns f's last
// error.
func Retry(ctx context.Context, retryable func(error) bool, f func(context.Context) error) error {
	if retryable == nil {
		retryable = NotRun
	}
	deadline := time.Now().Add(restartWait)
	wait := retryFirst
	for {
		err := f(ctx)
		if err == nil || !retryable(err) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, retryMax)
	}
}

// Broken reports whether err means the connection broke under a statement
// (the server ended the session, the connection was reset or cut off):
// the statement's outcome is unknown, so a write outside a transaction
// must not be run again on this ground; but a read, or a statement of a
// transaction that had not committed (the server rolls it back with the
// session), may. ErrNoAnswer is not among them: its wait was already the
// statement timeout's, and waiting it again would double the bound.
func Broken(err error) bool {
	if err == nil || errors.Is(err, ErrNoAnswer) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Severity == "FATAL" || pe.Severity == "PANIC" || pe.SeverityUnlocalized == "FATAL" || pe.SeverityUnlocalized == "PANIC"
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed)
}

// ReadRetryable is Retry's test for a read or an uncommitted transaction:
// NotRun or Broken.
func ReadRetryable(err error) bool { return NotRun(err) || Broken(err) }
