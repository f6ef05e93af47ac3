package mcphttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ErrForeignOrigin is returned by CheckOrigin.
var ErrForeignOrigin = errors.New("origin not allowed")

// CheckOrigin allows a request without an Origin header (a non-browser
// client), a same-origin request, and a request from a loopback page
// (http://localhost:*, http://127.0.0.1:*, http://[::1]:*). Anything else is
// a web page on another site talking to a local server through the user's
// browser, which is exactly what DNS rebinding protection must stop (spec
// 2025-11-25, transports, Security Warning: "Servers MUST validate the Origin
// header").
func CheckOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("%w: Origin %q is not an http(s) origin", ErrForeignOrigin, origin)
	}
	if strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	if IsLoopback(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%w: Origin %q is neither this server (%s) nor loopback", ErrForeignOrigin, origin, r.Host)
}

// ErrForeignHost is returned by CheckHost.
var ErrForeignHost = errors.New("host not allowed")

// CheckHost refuses a request that arrived on a loopback address but names
// another host in its Host header: a browser page whose domain was rebound to
// 127.0.0.1 (DNS rebinding) sends its own domain there, and may send no Origin
// at all on a same-origin GET. go-sdk's StreamableHTTPHandler does the same;
// the proxy needs it for itself.
func CheckHost(r *http.Request) error {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return nil
	}
	lhost, _, err := net.SplitHostPort(local.String())
	if err != nil || !IsLoopback(lhost) {
		return nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !IsLoopback(host) {
		return fmt.Errorf("%w: Host %q reached a loopback listener", ErrForeignHost, r.Host)
	}
	return nil
}

// IsLoopback reports whether host (a host name or IP, without port) names the
// local machine: "localhost" or a loopback IP.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
