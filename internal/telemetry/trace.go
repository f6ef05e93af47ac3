// Package telemetry is where switchboard's traces and metrics are set up:
// the OpenTelemetry tracer provider every command installs (Setup), the W3C
// trace context carried in the _meta of MCP requests (ExtractMeta; the pool
// injects it), and the Prometheus collectors the studio and the agent
// servers share (metrics.go).
//
// Tracing costs nothing unless it is asked for: without
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) Setup
// installs no SDK, the global tracer provider stays OpenTelemetry's no-op,
// and spans are never recorded. The trace context still passes through: a
// process without an exporter hands on the traceparent it received, so a
// trace is not cut in two by one agent that does not export.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of every switchboard span.
const TracerName = "github.com/switchboard-run/switchboard"

// Environment variables that turn the OTLP exporter on (the
// OpenTelemetry SDK's own names; the exporter reads the rest, such as
// OTEL_EXPORTER_OTLP_HEADERS, itself).
const (
	EnvOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// Keys of the W3C trace context in an MCP request's _meta (MCP SEP-414:
// the same names as the HTTP headers of W3C Trace Context).
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// Setup installs the process's tracer provider and returns the function that
// flushes and stops it; call it before exiting, or the last spans are lost.
// service names the process (service.name), unless OTEL_SERVICE_NAME says
// otherwise. Without an OTLP endpoint in the environment Setup installs
// nothing and returns a no-op shutdown.
//
// The propagator is W3C Trace Context whatever the environment, so that
// libraries using otel.GetTextMapPropagator agree with the pool's _meta.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	noop := func(context.Context) error { return nil }
	if os.Getenv(EnvOTLPEndpoint) == "" && os.Getenv(EnvOTLPTracesEndpoint) == "" {
		return noop, nil
	}
	// A collector that is down or slow must cost a command about a second
	// at exit, not the exporter's default 10 s per attempt with retries for
	// a minute: spans are a diagnostic, the command's answer is not.
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithTimeout(ExportTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		return noop, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	// service.name first, so that OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES (WithFromEnv) override it.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithProcessPID(),
	)
	if err != nil && res == nil {
		return noop, errors.Join(fmt.Errorf("telemetry: resource: %w", err), exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// FlushTimeout bounds the export of a command's last spans at exit, and
// ExportTimeout each export request: a collector that accepts connections
// and never answers delays a command's exit by at most FlushTimeout.
const (
	FlushTimeout  = time.Second
	ExportTimeout = 800 * time.Millisecond
)

// Start is Setup for a command: a failure to set up is reported through
// warn, and the returned stop flushes the last spans, bounded by
// FlushTimeout, reporting a failure through warn too. Call stop after the
// work whose spans should not be lost.
//
// OpenTelemetry's own errors (a failed export) go to warn too, the first
// one only, instead of the SDK's default of a raw log line on stderr per
// failed batch.
func Start(ctx context.Context, service string, warn func(msg string, err error)) (stop func()) {
	var once sync.Once
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		once.Do(func() { warn("traces not exported (reported once)", err) })
	}))
	shutdown, err := Setup(ctx, service)
	if err != nil {
		warn("tracing disabled", err)
	}
	return func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
		defer cancel()
		// The SDK's shutdown may outlive its context (an export in flight
		// runs to its own timeout first): stop waiting at the deadline,
		// since the process is about to exit anyway.
		done := make(chan error, 1)
		go func() { done <- shutdown(tctx) }()
		select {
		case err := <-done:
			if err != nil {
				once.Do(func() { warn("traces not exported", err) })
			}
		case <-tctx.Done():
			once.Do(func() {
				warn("traces not exported", fmt.Errorf("the collector did not answer within %v", FlushTimeout))
			})
		}
	}
}

// Tracer returns switchboard's tracer from tp, or from the global provider
// when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// ExtractMeta returns ctx carrying the remote span context of an MCP
// request's _meta traceparent/tracestate, when it has a valid one; the
// span a server starts under it is then a child of the caller's span.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	// Every request comes through here; most carry no trace context, and
	// tracestate alone is no span context, so they cost one map lookup.
	tp, ok := meta[MetaTraceparent].(string)
	if !ok {
		return ctx
	}
	c := propagation.MapCarrier{MetaTraceparent: tp}
	if ts, ok := meta[MetaTracestate].(string); ok {
		c[MetaTracestate] = ts
	}
	return propagation.TraceContext{}.Extract(ctx, c)
}
