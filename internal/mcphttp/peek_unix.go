//go:build unix

package mcphttp

import (
	"bytes"
	"net"
	"syscall"
)

// peekBytes is how much of a socket's unread bytes requestWaiting looks
// at: more than the head of any request our clients send.
const peekBytes = 4096

// requestWaiting reports whether a request head waits unread in c's
// socket: a client wrote its request, and net/http has not read it yet
// (its goroutine for the connection has not run, on a loaded machine or
// behind a flood of accepts). It peeks without blocking and without
// taking anything (Control, not Read: net/http may be blocked in a Read
// of the same connection).
//
// Only a complete head counts (its blank line is in what is waiting, or
// more is waiting than a head of ours takes): the byte a trickler just
// sent waits too, for as long as net/http takes to read it, and must not
// shelter the trickler. A connection it cannot peek at, an error, or the
// end of the stream count as nothing waiting: such a connection may give
// way.
func requestWaiting(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	err = raw.Control(func(fd uintptr) {
		var b [peekBytes]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		waiting = err == nil && (n == len(b) || bytes.Contains(b[:n], []byte("\r\n\r\n")))
	})
	return err == nil && waiting
}
