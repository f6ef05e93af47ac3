package askcmd

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-run/switchboard/internal/telemetry"
)

// The ask is the root of its trace: a "switchboard ask" span covers the
// whole command, and the pool's tools/call under it carries the trace
// context to the agent in _meta, so every span of every agent the task
// reaches joins this one trace. Spans are exported only when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (telemetry.Setup).

// setupTracing installs the tracer provider and returns what flushes it.
func setupTracing(ctx context.Context, stderr io.Writer) func() {
	return telemetry.Start(ctx, "switchboard-ask", func(msg string, err error) {
		fmt.Fprintf(stderr, "switchboard ask: %s: %v\n", msg, err)
	})
}

func startAskSpan(ctx context.Context, cfg *config) (context.Context, trace.Span) {
	return telemetry.Tracer(nil).Start(ctx, "switchboard ask", trace.WithAttributes(
		attribute.String("switchboard.agent", cfg.agent),
	))
}

// failSpan marks the ask's span failed with what the command reports.
func failSpan(span trace.Span, err error) {
	span.SetStatus(codes.Error, err.Error())
}
