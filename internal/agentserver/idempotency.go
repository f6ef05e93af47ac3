package agentserver

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/telemetry"
)

// Every agent server speaks the idempotency protocol (docs/IDEMPOTENCY.md):
// its guard is the innermost receiving middleware, inside the chain check
// (a refused call is not recorded) and inside the concurrency cap (a call
// waiting for a slot has not started, so a crash then is not reported as an
// interruption). Its ledger is DataDir/idempotency.db, or, with
// Options.DatabaseURL, the PostgreSQL ledger all the agent's replicas
// share. Which tools need no record and which keep their own is declared
// once every tool is registered: tools annotated readOnlyHint are recomputed on a repeat, and a
// toolset whose Closer is an ledger.TxLedger (packrat) records its
// transactional tools itself.

// LedgerFile is the ledger's file name in the data directory.
const LedgerFile = "idempotency.db"

// MetricIdempotency counts keyed tools/call by what the guard did.
const MetricIdempotency = "switchboard_idempotency_calls_total"

type idemServer struct {
	ledger *ledger.Ledger
	guard  *ledger.Guard
}

// startIdempotency opens the ledger and installs the guard; call it before
// any other receiving middleware is added.
func (s *Server) startIdempotency() error {
	var (
		l   *ledger.Ledger
		err error
	)
	if s.dbURL != "" {
		l, err = ledger.OpenPostgres(context.Background(), s.dbURL, &ledger.PostgresOptions{Schema: s.dbSchema})
	} else {
		l, err = ledger.Open(filepath.Join(s.dataDir, LedgerFile), nil)
	}
	if err != nil {
		return fmt.Errorf("agent %s: %w", s.def.Name, err)
	}
	s.idem = &idemServer{ledger: l, guard: ledger.NewGuard(l, &ledger.GuardOptions{Logger: s.logger})}
	s.mcp.AddReceivingMiddleware(s.idem.guard.Middleware)
	// Closed with the toolsets (after the HTTP server has stopped), also
	// when New fails later.
	s.closers = append(s.closers, namedCloser{"idempotency ledger", l})
	return nil
}

// declareIdempotency tells the guard which tools are pure and which are
// transactional, and registers its metrics. Call it once every tool is
// registered.
func (s *Server) declareIdempotency() error {
	g := s.idem.guard
	for _, c := range s.closers {
		if tx, ok := c.Closer.(interface {
			ledger.TxLedger
			TransactionalTools() []string
		}); ok {
			for _, tool := range tx.TransactionalTools() {
				g.Transactional(tool, tx)
			}
		}
	}
	tools, err := s.listOwnTools()
	if err != nil {
		return fmt.Errorf("agent %s: listing its tools for the idempotency guard: %w", s.def.Name, err)
	}
	for _, t := range tools {
		if t.Annotations != nil && t.Annotations.ReadOnlyHint {
			g.Pure(t.Name)
		}
	}
	s.metrics.reg.MustRegister(&idemCollector{guard: g, desc: prometheus.NewDesc(MetricIdempotency,
		"tools/call requests that carried an idempotency key, by what the server did: recorded (ran for the first time), replay (answered from the record), conflict, interrupted, still_running, expired, resumed (an ask a crash cut off, gone on from its run journal).",
		[]string{"outcome"}, prometheus.Labels{telemetry.LabelProcess: s.def.Name})})
	return nil
}

// listOwnTools lists the server's tools through an in-memory session: go-sdk
// has no other way to read a registered tool's annotations.
func (s *Server) listOwnTools() ([]*mcp.Tool, error) {
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.mcp.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "self", Version: version()}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// IdempotencyStats reports the guard's counters.
func (s *Server) IdempotencyStats() ledger.GuardStats { return s.idem.guard.Stats() }

type idemCollector struct {
	guard *ledger.Guard
	desc  *prometheus.Desc
}

func (c *idemCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *idemCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.guard.Stats()
	for _, v := range []struct {
		outcome string
		n       int64
	}{
		{"recorded", st.Recorded}, {"replay", st.Replays}, {"conflict", st.Conflicts},
		{"interrupted", st.Interrupted}, {"still_running", st.StillRunning}, {"expired", st.Expired},
		{"resumed", st.Resumed},
	} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(v.n), v.outcome)
	}
}

var _ io.Closer = (*ledger.Ledger)(nil)
