package mcphttp

import "net/http"

// Two protocol eras on one endpoint. A 2025-11-25 client opens a session
// (initialize, then Mcp-Session-Id on every request); a 2026-07-28 client
// has none: it asks server/discover, and every request carries its protocol
// version in the MCP-Protocol-Version header and in _meta (SEP-2575).
// go-sdk v1.8.0 serves the second only from a handler with
// StreamableHTTPOptions.Stateless set (mcp/streamable.go: a stateful
// handler answers such a request with CodeUnsupportedProtocolVersion, and
// its server/discover leaves 2026-07-28 out of supportedVersions, since
// StreamableServerTransport.SupportsProtocolVersion is true for it only
// when stateless), and a stateless handler has no sessions at all. So an
// endpoint that serves both eras is two go-sdk handlers over the same
// mcp.Server, and ByEra picks one per request.
//
// ByEra sits behind the Handler, so both eras pass the same checks (Host,
// Origin, bearer, body limit and budget, RefuseCall) before it chooses.

// EraVersion is the first protocol version of the sessionless era.
const EraVersion = "2026-07-28"

// ProtocolVersionHeader is the Streamable HTTP transport's version header.
const ProtocolVersionHeader = "MCP-Protocol-Version"

// metaProtocolVersion is the _meta member in which a request of the
// sessionless era names its version (go-sdk mcp.MetaKeyProtocolVersion).
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// ByEra returns a handler that sends a request of the sessionless era to
// sessionless and every other request to sessions. A request is of the
// sessionless era when it carries no Mcp-Session-Id and either its
// MCP-Protocol-Version header is EraVersion or later (versions are dates,
// so they compare as strings, as go-sdk compares them), or it is a
// server/discover (which only that era sends, and which only a stateless
// go-sdk handler answers with both eras' versions), or its _meta names a
// protocol version (go-sdk's stateless handler then explains a missing
// header; the session handler would say the version is unsupported).
//
// A request with a session id always goes to sessions, whatever it claims:
// only that handler knows the session, and its answer (404, or a version
// mismatch) is the spec's. The parsed message comes from the request's
// context (ReadRequest); without it only the header decides.
func ByEra(sessions, sessionless http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Sessionless(r) {
			sessionless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
}

// Sessionless reports whether r is a request of the sessionless era (see
// ByEra).
func Sessionless(r *http.Request) bool {
	if r.Header.Get(SessionIDHeader) != "" {
		return false
	}
	if v := r.Header.Get(ProtocolVersionHeader); v >= EraVersion {
		return true
	}
	m, ok := MessageFrom(r.Context())
	if !ok {
		return false
	}
	if m.Method == "server/discover" {
		return true
	}
	_, named := m.Meta[metaProtocolVersion]
	return named
}
