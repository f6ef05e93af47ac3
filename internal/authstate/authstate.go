// Package authstate says, for every MCP server an agent may sign in to,
// whether the pool holds a token for it, for whom, with which scopes and
// until when: what `switchboard status`, the studio's /api/auth and its
// page show. It reads the token store (internal/tokenstore) the agents'
// pools read and write, so a running studio sees a `switchboard login` or a
// refresh done by an agent as soon as the file is there.
//
// The wire type carries no secret by construction: a [Server] is built
// field by field from the public half of a record (issuer, scopes, expiry,
// whether a refresh token exists), never from the access token, the refresh
// token or the client secret, and tests check that none of them reaches the
// JSON or the text.
//
// Which servers count: every Streamable HTTP server of an mcp.json whose
// configuration does not send its own Authorization header (the pool leaves
// those alone, pool/oauth.go), since any of them may ask for OAuth with a
// 401 and be signed in to without configuration. A server with an "oauth"
// block is marked Configured; one without shows as signed out until someone
// signs in, which is also true of a server that never asks.
package authstate

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// State is a server's sign-in state.
type State string

// States.
const (
	// SignedIn: a token is held and has not expired (or never expires).
	SignedIn State = "signed_in"
	// Expired: the token held has expired; with a refresh token (or the
	// client credentials grant) the pool renews it on next use, else the
	// person signs in again.
	Expired State = "expired"
	// SignedOut: no token is held.
	SignedOut State = "signed_out"
	// Unreadable: the store has a file for the server that cannot be read;
	// Error says why.
	Unreadable State = "unreadable"
)

// Server is one server's sign-in state. It never holds a token.
type Server struct {
	// Server is the server's name in the mcp.json; URL its endpoint (the
	// protected resource the token is for).
	Server string `json:"server"`
	URL    string `json:"url"`
	// Agents are the agents whose tools/mcp.json names this server (by URL),
	// sorted; empty for a state read from one mcp.json.
	Agents []string `json:"agents,omitempty"`
	// Identity is the pool identity the token is for; empty: the agents'
	// own.
	Identity string `json:"identity,omitempty"`
	// Grant is how a token is got: authorization_code (a person signs in
	// with `switchboard login`) or client_credentials (the pool gets one).
	Grant string `json:"grant"`
	// Configured: the server's configuration has an "oauth" block; without
	// one it is signed in to by discovery, if it asks.
	Configured bool  `json:"configured"`
	State      State `json:"state"`
	// Issuer, Scopes and Expires describe the token held: the
	// authorization server that issued it, the scopes granted, when it
	// expires (absent: never).
	Issuer  string     `json:"issuer,omitempty"`
	Scopes  []string   `json:"scopes,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
	// Obtained is when the access token was issued to the pool.
	Obtained *time.Time `json:"obtained,omitempty"`
	// Refreshable: the pool can renew the token without a person (a
	// refresh token is held, or the grant is client credentials).
	Refreshable bool `json:"refreshable"`
	// Error says why a stored record could not be read.
	Error string `json:"error,omitempty"`
	// Refused is the last time an agent's pool was refused by the server
	// and could get no token it accepted, since the last token was got.
	Refused *Refusal `json:"refused,omitempty"`
}

// A Refusal is the server's last refusal of a pool's request.
type Refusal struct {
	At     time.Time `json:"at"`
	Status int       `json:"status"`
	// Error and Scope are the challenge's (insufficient_scope and the scope
	// it asks for, or invalid_token).
	Error  string `json:"error,omitempty"`
	Scope  string `json:"scope,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Report is the wire form: the servers sorted by name, then URL.
type Report struct {
	Servers []Server `json:"servers"`
}

// ForAgents is the state of every server the agents' tools/mcp.json name,
// one entry per (URL, identity) with the agents that use it, read from
// store at now. A definition without an mcp.json contributes nothing.
func ForAgents(defs []*agentdef.Definition, store *tokenstore.Store, now time.Time) Report {
	byURL := map[string]*Server{}
	var order []*Server
	for _, d := range defs {
		if d == nil || d.MCP == nil {
			continue
		}
		for _, s := range d.MCP.Servers {
			if !counts(s) {
				continue
			}
			// Agents' pools call with their own identity (empty), so the
			// URL alone is the key here.
			st, ok := byURL[s.URL]
			if !ok {
				st = &Server{Server: s.Name, URL: s.URL, Grant: grant(s), Configured: s.OAuth != nil}
				byURL[s.URL] = st
				order = append(order, st)
			} else if s.OAuth != nil {
				// One agent configures the server, another discovers it:
				// the configured grant is the one that gets tokens for both.
				st.Configured, st.Grant = true, cmp.Or(grant(s), st.Grant)
			}
			if !slices.Contains(st.Agents, d.Name) {
				st.Agents = append(st.Agents, d.Name)
			}
		}
	}
	out := Report{Servers: []Server{}}
	for _, st := range order {
		slices.Sort(st.Agents)
		fill(st, store, now)
		out.Servers = append(out.Servers, *st)
	}
	sortServers(out.Servers)
	return out
}

// ForConfig is the state of every server of one mcp.json for identity, as
// `switchboard status --auth` shows it without a studio.
func ForConfig(cfg *mcpconfig.Config, identity string, store *tokenstore.Store, now time.Time) Report {
	out := Report{Servers: []Server{}}
	for _, s := range cfg.Servers {
		if !counts(s) {
			continue
		}
		st := Server{Server: s.Name, URL: s.URL, Identity: identity, Grant: grant(s), Configured: s.OAuth != nil}
		fill(&st, store, now)
		out.Servers = append(out.Servers, st)
	}
	sortServers(out.Servers)
	return out
}

// counts reports whether s is a server the pool may sign in to.
func counts(s *mcpconfig.Server) bool {
	if s.Type != mcpconfig.TypeHTTP {
		return false
	}
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			return false // the configuration's own credentials: pool/oauth.go sends them as they are
		}
	}
	return true
}

func grant(s *mcpconfig.Server) string {
	if s.OAuth != nil && s.OAuth.Grant != "" {
		return string(s.OAuth.Grant)
	}
	return string(pool.GrantAuthorizationCode)
}

// fill reads st's record. Only the public fields are copied, one by one:
// nothing of the record is kept that a person may not see.
func fill(st *Server, store *tokenstore.Store, now time.Time) {
	st.State = SignedOut
	if store == nil {
		return
	}
	key := tokenstore.Key{URL: st.URL, Identity: st.Identity}
	if r, err := store.LoadRefusal(key); err == nil {
		st.Refused = &Refusal{At: r.At.UTC(), Status: r.Status, Error: r.Error, Scope: r.Scope, Reason: r.Reason}
	}
	rec, err := store.Load(key)
	switch {
	case errors.Is(err, tokenstore.ErrNotFound):
		return
	case err != nil:
		// tokenstore's errors name the file and the cause, never its
		// bytes.
		st.State, st.Error = Unreadable, err.Error()
		return
	}
	st.State, st.Issuer, st.Scopes = SignedIn, rec.Issuer, slices.Clone(rec.Scopes)
	st.Refreshable = rec.RefreshToken != "" || st.Grant == string(pool.GrantClientCredentials)
	if !rec.Expiry.IsZero() {
		exp := rec.Expiry.UTC()
		st.Expires = &exp
		if !now.Before(exp) {
			st.State = Expired
		}
	}
	if !rec.Obtained.IsZero() {
		at := rec.Obtained.UTC()
		st.Obtained = &at
	}
}

func sortServers(s []Server) {
	slices.SortStableFunc(s, func(a, b Server) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.URL, b.URL))
	})
}

// Write prints r as a table, one line per server, for a person.
func Write(w io.Writer, r Report) {
	if len(r.Servers) == 0 {
		fmt.Fprintln(w, "no HTTP servers that sign in")
		return
	}
	for _, s := range r.Servers {
		fmt.Fprintf(w, "%-20s %s", s.Server, Describe(s))
		if len(s.Agents) > 0 {
			fmt.Fprintf(w, " (used by %s)", strings.Join(s.Agents, ", "))
		}
		fmt.Fprintln(w)
	}
}

// Describe is one server's state in a sentence.
func Describe(s Server) string {
	d := describeToken(s)
	if r := s.Refused; r != nil {
		d += fmt.Sprintf("; last refused %s (%d", r.At.Format(time.RFC3339), r.Status)
		if r.Error != "" {
			d += " " + r.Error
		}
		if r.Scope != "" {
			d += ", wants scope " + r.Scope
		}
		d += ")"
		if r.Reason != "" {
			d += ": " + r.Reason
		}
	}
	return d
}

func describeToken(s Server) string {
	switch s.State {
	case Unreadable:
		return "token unreadable: " + s.Error
	case SignedOut:
		if s.Grant == string(pool.GrantClientCredentials) {
			return "no token yet (client credentials: the pool gets one on first use)"
		}
		if s.Configured {
			return "not signed in: switchboard login " + s.Server
		}
		return "not signed in (if it asks for OAuth: switchboard login " + s.Server + ")"
	}
	var b strings.Builder
	b.WriteString("signed in")
	if s.Issuer != "" {
		b.WriteString(" at " + s.Issuer)
	}
	if len(s.Scopes) > 0 {
		fmt.Fprintf(&b, "; scopes %s", strings.Join(s.Scopes, " "))
	}
	switch {
	case s.Expires == nil:
		b.WriteString("; the token does not expire")
	case s.State == Expired && s.Refreshable:
		fmt.Fprintf(&b, "; expired %s, renewed on next use", s.Expires.Format(time.RFC3339))
	case s.State == Expired:
		fmt.Fprintf(&b, "; expired %s: switchboard login %s", s.Expires.Format(time.RFC3339), s.Server)
	default:
		fmt.Fprintf(&b, "; expires %s", s.Expires.Format(time.RFC3339))
		if s.Refreshable {
			b.WriteString(", refreshable")
		}
	}
	return b.String()
}

// StoreFor is the token store of processes started with env added after
// the current environment (as the studio starts its agents): the last
// SWITCHBOARD_TOKEN_DIR in env, else tokenstore.DefaultDir. nil when there
// is no directory to read (no configuration directory either): every
// server then shows signed out.
func StoreFor(env []string) *tokenstore.Store {
	for _, kv := range slices.Backward(env) {
		if d, ok := strings.CutPrefix(kv, tokenstore.EnvDir+"="); ok && d != "" {
			return &tokenstore.Store{Dir: d}
		}
	}
	d, err := tokenstore.DefaultDir()
	if err != nil {
		return nil
	}
	return &tokenstore.Store{Dir: d}
}
