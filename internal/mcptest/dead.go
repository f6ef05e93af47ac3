package mcptest

import (
	"net"
	"testing"
)

// DeadURL returns the base URL (http://127.0.0.1:PORT) of an endpoint that
// is down: its listener closes every connection as soon as it is accepted,
// so a request fails before any answer, naming its URL. The listener is
// held until the test ends. (Closing an httptest server to get a dead
// address is not that: on a loaded machine another test's server took the
// freed port, and the "dead" sibling answered 404.)
func DeadURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			// Any error ends the loop: ErrClosed at cleanup, and one that
			// would repeat (out of descriptors) must not spin; the port
			// stays held, and connections to it are then refused.
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}
