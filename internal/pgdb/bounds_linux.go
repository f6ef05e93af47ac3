package pgdb

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on the socket c: data the peer has
// not acknowledged for d (a query sent into a partition) ends the
// connection, as unanswered keepalive probes do once it is idle.
func setUserTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}

// peek reads one byte of raw without taking it and without waiting: n is
// 1 with bytes waiting, 0 at the end of the stream; rerr is recv's error
// (EAGAIN: nothing waiting), err Control's. Control, not Read, as the
// proxy's and mcphttp's peeks: Read would queue for the socket's read lock
// behind a Read in progress (pgx's background reader, parked on an idle
// connection until the server speaks; see CheckIdle).
func peek(raw syscall.RawConn) (n int, rerr, err error) {
	var b [1]byte
	err = raw.Control(func(fd uintptr) {
		n, _, rerr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	return n, rerr, err
}
