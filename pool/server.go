package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"sync"
)

// Protocol versions the pool knows by name.
const (
	// Protocol20251125 is the MCP era with sessions (Mcp-Session-Id,
	// initialize).
	Protocol20251125 = "2025-11-25"
	// Protocol20260728 is the sessionless MCP era (server/discover, per-request
	// _meta, no Mcp-Session-Id).
	Protocol20260728 = "2026-07-28"
)

// A Server describes one MCP server the pool can reach: either a Streamable
// HTTP endpoint (URL set) or a stdio command (Command set).
//
// Two Servers with the same endpoint but different Headers (and so different
// credentials) or different Identity never share an upstream session.
type Server struct {
	// Name is the server's name in its mcp.json; it labels errors and stats.
	Name string
	// URL is the Streamable HTTP endpoint.
	URL string
	// Headers are sent on every HTTP request (for example Authorization).
	Headers map[string]string

	// Command, Args and Env describe a stdio server; Dir, when set, is its
	// working directory.
	Command string
	Args    []string
	Env     map[string]string
	Dir     string

	// ProtocolVersion pins the MCP protocol version when it is known. Empty
	// means: discover it on first connect and remember it for re-dials.
	ProtocolVersion string

	// Identity distinguishes callers that must not share a session even when
	// their headers are equal (for example two end users behind one token).
	Identity string

	// OAuth, when set, configures the server's OAuth beyond what discovery
	// finds (see OAuthOptions). Servers without it still get OAuth when they ask.
	OAuth *OAuthConfig

	// MaxResultBytes caps the bytes of one answer the pool reads: over
	// HTTP the body of a request's own POST (a tool result, a list page;
	// of an SSE stream, each event: progress before a result is not
	// counted against it), over stdio one line of the server's stdout.
	// Zero means DefaultMaxResultBytes. Past it the pool stops reading,
	// keeps nothing of the answer, and fails the request with a
	// *ResultTooLargeError (ErrResultTooLarge); a stdio server's process
	// is then restarted, the rest of the line being still in its pipe.
	MaxResultBytes int64
}

// DefaultMaxResultBytes is Server.MaxResultBytes's default: 16 MiB, the
// agent server's own cap of a tool result it puts before a model
// (agentdef.MaxMaxToolResultBytes), so a larger answer is one no turn could
// use whole; holding 50 MB of it took an agent from 214 to 656 MB.
const DefaultMaxResultBytes = 16 << 20

// maxResultBytes is s's cap of one answer.
func (s *Server) maxResultBytes() int64 {
	if s.MaxResultBytes > 0 {
		return s.MaxResultBytes
	}
	return DefaultMaxResultBytes
}

// key identifies a pool entry. It is comparable so that it can key a map, as
// net/http's connectMethodKey does.
type key struct {
	endpoint string // URL, or the stdio command line digest
	identity string // digest of headers, env and Identity
	protocol string
}

// keyMemo remembers the keys of the Servers a pool was given, so that a
// caller passing the same *Server for every call (as they do) does not pay
// for hashing its headers on each one. A memo is used only while the Server
// still equals the snapshot it was computed from, so a caller that changes
// its Server in place gets the new key.
type keyMemo struct {
	mu sync.Mutex // protects m
	m  map[*Server]*memoized
}

type memoized struct {
	snap Server // a deep copy
	k    key
}

// maxKeyMemos bounds the memo: a caller that builds a Server per call would
// otherwise grow it for ever. Past it, the memo starts afresh.
const maxKeyMemos = 1024

func (km *keyMemo) key(s *Server) key {
	km.mu.Lock()
	if m := km.m[s]; m != nil && m.snap.equal(s) {
		km.mu.Unlock()
		return m.k
	}
	km.mu.Unlock()
	k := s.key()
	m := &memoized{snap: s.clone(), k: k}
	km.mu.Lock()
	if km.m == nil || len(km.m) >= maxKeyMemos {
		km.m = make(map[*Server]*memoized)
	}
	km.m[s] = m
	km.mu.Unlock()
	return k
}

func (s *Server) clone() Server {
	c := *s
	c.Headers = maps.Clone(s.Headers)
	c.Env = maps.Clone(s.Env)
	c.Args = slices.Clone(s.Args)
	if s.OAuth != nil {
		o := *s.OAuth
		o.Scopes = slices.Clone(s.OAuth.Scopes)
		c.OAuth = &o
	}
	return c
}

// equal reports whether o has every field that makes the key equal to s's.
func (s *Server) equal(o *Server) bool {
	return s.URL == o.URL && s.Command == o.Command && s.Dir == o.Dir && s.ProtocolVersion == o.ProtocolVersion &&
		s.Identity == o.Identity && slices.Equal(s.Args, o.Args) &&
		maps.Equal(s.Headers, o.Headers) && maps.Equal(s.Env, o.Env) && sameOAuth(s.OAuth, o.OAuth)
}

func (s *Server) key() key {
	h := sha256.New()
	write := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
	}
	write(s.Identity)
	if o := s.OAuth; o != nil {
		// Two clients of one server hold different tokens.
		write("o", o.ClientID, string(o.Grant))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		write("h", k, s.Headers[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		write("e", k, s.Env[k])
	}
	endpoint := s.URL
	if endpoint == "" {
		c := sha256.New()
		for _, a := range append([]string{s.Dir, s.Command}, s.Args...) {
			c.Write([]byte(a))
			c.Write([]byte{0})
		}
		endpoint = "stdio:" + hex.EncodeToString(c.Sum(nil))
	}
	return key{endpoint: endpoint, identity: hex.EncodeToString(h.Sum(nil)), protocol: s.ProtocolVersion}
}
