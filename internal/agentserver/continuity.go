package agentserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-run/switchboard/internal/pgdb"
	"github.com/switchboard-run/switchboard/internal/proxy"
	"github.com/switchboard-run/switchboard/internal/proxy/sessionstore"
)

// Session continuity for the agent's own clients (internal/proxy,
// continuity.go and continuity_local.go): the layer the studio puts in
// front of every agent, here in front of the agent's session-era handler,
// so that a client connected straight to `agent serve` keeps its session
// across the agent's restart, and, with --database, on whichever replica
// its request lands. What it keeps of each session (its initialize's
// params, the level, the subscriptions; never a header or a token) is in
// DataDir/continuity.db (0600), or in the agent's PostgreSQL schema,
// shared by its replicas.
//
// Under the studio it is off (the studio sets EnvContinuity=0 for the
// agents it starts): the studio's own continuity keeps those sessions,
// and also knows which call each of their streams answered, which this
// one does not keep beyond the process.

// EnvContinuity, set to 0, turns the agent's own session continuity off
// (Options.NoContinuity); unset or 1 keeps it on.
const EnvContinuity = proxy.EnvContinuity

// errContinuityValue is the error for a value of EnvContinuity that is
// neither 0 nor 1.
var errContinuityValue = errors.New("want 0 (off) or 1 (on, the default)")

// NoContinuityFromEnv reports whether the environment turns the agent's
// own session continuity off.
func NoContinuityFromEnv() (bool, error) {
	switch v := os.Getenv(EnvContinuity); v {
	case "", "1":
		return false, nil
	case "0":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: %w", EnvContinuity, v, errContinuityValue)
	}
}

// localEndpoint is where the continuity's own requests (the DELETE of an
// expired session) are addressed: they never leave the process.
var localEndpoint = &url.URL{Scheme: "http", Host: "agent.local", Path: "/mcp"}

// startContinuity puts continuity in front of sessioned, the go-sdk
// handler of the session era, and returns the handler to serve instead.
// ttl is the middleware's binding TTL.
func (s *Server) startContinuity(sessioned http.Handler, ttl time.Duration) (http.Handler, error) {
	var db sessionstore.DB
	if s.dbURL != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pool, err := pgdb.Open(ctx, s.dbURL, pgdb.Options{Schema: s.dbSchema, MaxConns: 2})
		if err != nil {
			return nil, fmt.Errorf("agent %s: session continuity: %w", s.def.Name, err)
		}
		if db, err = sessionstore.OpenPostgres(ctx, pool); err != nil {
			pool.Close()
			return nil, fmt.Errorf("agent %s: %w", s.def.Name, err)
		}
		s.closers = append(s.closers, namedCloser{"session continuity", poolCloser{pool}})
	} else {
		var err error
		if db, err = sessionstore.OpenSQLite(filepath.Join(s.dataDir, sessionstore.File)); err != nil {
			return nil, fmt.Errorf("agent %s: %w", s.def.Name, err)
		}
		s.closers = append(s.closers, namedCloser{"session continuity", db})
	}
	c := proxy.NewContinuity(proxy.HandlerTransport(sessioned), ttl, s.logger)
	c.Store = db.Scope(s.def.Name)
	c.CloseAt = func() *url.URL { return localEndpoint }
	s.continuity = c
	return proxy.Local(c), nil
}

// poolCloser closes a pgxpool.Pool as an io.Closer.
type poolCloser struct{ *pgxpool.Pool }

func (p poolCloser) Close() error { p.Pool.Close(); return nil }
