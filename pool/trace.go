package pool

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing. Every request the pool sends is a client span ("tools/call
// TOOL", "tools/list"), and every session it establishes is a span of its own
// under the request that needed it ("pool.dial", or "pool.reinitialize" when
// it replaces a session the server forgot). The span of a tools/call covers
// its retry, so both attempts carry the same traceparent.
//
// The W3C trace context of the request's span travels in the tools/call's
// _meta as "traceparent" and "tracestate" (MCP SEP-414), where the server
// extracts it and starts its own span as a child: one trace follows a task
// across agents, through proxies that know nothing of tracing. With the
// OpenTelemetry default (no SDK installed) no span is recording and no
// traceparent is sent, unless the caller's context already carries a remote
// one, which is handed on.

// tracerName is the instrumentation scope of the pool's spans.
const tracerName = "github.com/switchboard-run/switchboard/pool"

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// otelDefault is otel's global TracerProvider as it is until a program
// calls otel.SetTracerProvider: a delegate whose spans, until then, never
// record and carry their parent's span context, nothing else. Starting
// one still costs three allocations (the span, boxed twice, and the
// context that holds it), a fifth of what the pool added to a call, so a
// pool on the global provider skips its request span while
// otel.GetTracerProvider() is still that delegate (see Pool.traces): the
// request's context then carries the same span context it would have.
// otelDefault is nil if the provider in place when this package is
// initialized already makes spans of its own (a program that set one in
// an init that ran first): every request then has its span. (otel's eBPF
// auto-instrumentation, which turns the default's spans into real ones
// from outside the process, is not seen.)
var otelDefault = passthrough(otel.GetTracerProvider())

// passthrough returns tp if its spans are its parents' (not recording,
// no span context of their own), else nil.
func passthrough(tp trace.TracerProvider) trace.TracerProvider {
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	_, span := tp.Tracer(tracerName).Start(trace.ContextWithSpanContext(context.Background(), parent), "passthrough")
	defer span.End()
	if span.IsRecording() || !span.SpanContext().Equal(parent) {
		return nil
	}
	return tp
}

// traces reports whether the pool's request spans can record: it has a
// TracerProvider of its own, or the global one is no longer otel's
// default (see otelDefault).
func (p *Pool) traces() bool {
	return p.opts.TracerProvider != nil || otelDefault == nil || otel.GetTracerProvider() != otelDefault
}

// clientSpan is the start option of every request span, built once: with
// no SDK installed nothing records, and the span of a call must then cost
// next to nothing.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// startRequestSpan starts the client span of one pool operation. Its full
// name and attributes are set only when it records: a sampler sees the
// method as the name, and no attributes, at start.
func (p *Pool) startRequestSpan(ctx context.Context, srv *Server, method, tool string) (context.Context, trace.Span) {
	ctx, span := p.tracer.Start(ctx, method, clientSpan...)
	if !span.IsRecording() {
		return ctx, span
	}
	if tool != "" {
		span.SetName(method + " " + tool)
	}
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", method),
		attribute.String("switchboard.server", srv.Name),
	}
	if tool != "" {
		attrs = append(attrs, attribute.String("gen_ai.tool.name", tool))
	}
	if srv.URL != "" {
		attrs = append(attrs, attribute.String("url.full", srv.URL))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// endSpan records err (if any) on span and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			span.SetAttributes(attribute.String("error.type", pe.Kind.String()), attribute.Bool("switchboard.retried", pe.Retried))
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// markRetry notes on the request's span that it is being sent again on a
// new session, and why.
func markRetry(ctx context.Context, cause error) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.Bool("switchboard.retried", true))
	span.AddEvent("retry on a new session", trace.WithAttributes(attribute.String("cause", cause.Error())))
}

// withTraceMeta returns params carrying ctx's trace context in _meta, as a
// copy; the caller's params are not modified. Without a span context it
// returns params as they are.
func withTraceMeta(ctx context.Context, params *mcp.CallToolParams) *mcp.CallToolParams {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return params // nothing to hand on; saves the carrier
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if len(c) == 0 {
		return params
	}
	return withMeta(params, c)
}
