//go:build !linux

package pgdb

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not there:
// keepalive alone bounds a dead idle connection, and the read bound a
// connection that waits for an answer.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }

// peek cannot look without waiting here: n -1, CheckIdle finds nothing.
func peek(syscall.RawConn) (n int, rerr, err error) { return -1, nil, nil }
