package mcphttp

import "net/netip"

// TreatLoopbackAsDistinct gives every loopback address a share of b's
// connections, as a network address has: tests can dial only from 127/8.
func TreatLoopbackAsDistinct(b *Budget) {
	b.sharedAddr = func(a netip.Addr) bool { return !a.IsValid() }
}

// TreatLoopbackAsDistinctSessions does for h's session shares what
// TreatLoopbackAsDistinct does for a budget's connections.
func TreatLoopbackAsDistinctSessions(h *Handler) {
	h.sessions.sharedAddr = func(a netip.Addr) bool { return !a.IsValid() }
}

// RequestWaiting reports whether a request head waits unread in c's
// socket, as the budget sees it when choosing whom to evict.
var RequestWaiting = requestWaiting
