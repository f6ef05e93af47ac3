package delegation

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Each delegation is a span named as the OpenTelemetry GenAI conventions
// name a tool execution, "execute_tool <model tool name>", in the turn's
// span. The pool's tools/call span is its child, and that span's context is
// what travels to the sibling in _meta: the sibling's work nests under this
// delegation in the trace. Arguments and results are not recorded.

const tracerName = "github.com/switchboard-run/switchboard/delegation"

func (e *Executor) startSpan(ctx context.Context, c Call, t *Target) (context.Context, trace.Span) {
	return otel.Tracer(tracerName).Start(ctx, "execute_tool "+c.Name, trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", c.Name),
		attribute.String("gen_ai.tool.call.id", c.ID),
		attribute.String("switchboard.agent", t.Server.Name),
		attribute.String("switchboard.tool", t.Tool.Name),
		attribute.String("switchboard.run_id", e.Chain.RunID),
		attribute.Int("switchboard.depth", e.Chain.Depth),
	))
}

// endSpan records how the delegation ended and ends its span.
func endSpan(span trace.Span, ev Event) {
	span.SetAttributes(attribute.String("switchboard.outcome", string(ev.Outcome)))
	if ev.Retried {
		span.SetAttributes(attribute.Bool("switchboard.retried", true), attribute.Bool("switchboard.recovered", ev.Recovered))
	}
	if ev.Outcome != OutcomeOK {
		span.SetAttributes(attribute.String("error.type", string(ev.Outcome)))
		span.SetStatus(codes.Error, string(ev.Outcome))
	}
	span.End()
}
