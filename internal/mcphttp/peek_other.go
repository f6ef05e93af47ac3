//go:build !unix

package mcphttp

import "net"

// requestWaiting cannot peek at a socket here: every connection may give
// way, as before the peek existed (see peek_unix.go).
func requestWaiting(net.Conn) bool { return false }
