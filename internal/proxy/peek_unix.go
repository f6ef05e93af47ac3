//go:build unix

package proxy

import (
	"errors"
	"fmt"
	"syscall"
)

// peerClosed peeks at the socket without blocking and without taking
// anything from it (Control, not Read: net/http's read loop may be blocked
// in a Read of the same connection). Nothing to read is a live idle
// connection; end of stream, an error, or bytes nobody asked for mean the
// agent is gone or the connection is not fit for a request.
func peerClosed(raw syscall.RawConn) error {
	var closed error
	err := raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
		case err != nil:
			closed = fmt.Errorf("%w: %w", ErrAgentClosed, err)
		case n == 0:
			closed = ErrAgentClosed
		default:
			closed = fmt.Errorf("%w: unsolicited bytes on an idle connection", ErrAgentClosed)
		}
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAgentClosed, err)
	}
	return closed
}
