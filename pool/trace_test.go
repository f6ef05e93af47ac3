package pool

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// metaRecorder records the traceparent of every tools/call a go-sdk server
// receives, by call id.
type metaRecorder struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (m *metaRecorder) install(s *mcp.Server) {
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				tp, _ := p.Meta["traceparent"].(string)
				var args struct{ ID string }
				json.Unmarshal(p.Arguments, &args)
				m.mu.Lock()
				m.seen[args.ID] = append(m.seen[args.ID], tp)
				m.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
}

func (m *metaRecorder) get(id string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen[id]...)
}

// TestTracing: each request is a client span under the caller's, the
// session it needed is a pool.dial span under it (pool.reinitialize when it
// replaced one the server forgot), and the request's span context reaches
// the server as _meta.traceparent (MCP SEP-414).
func TestTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	ts := newTestServer(t, false)
	rec := &metaRecorder{seen: map[string][]string{}}
	rec.install(ts.MCPServer())
	p := newTestPool(t, &Options{TracerProvider: tp})
	srv := server(ts, "test")

	ctx, root := tp.Tracer("test").Start(context.Background(), "root")
	traced := func(id string) {
		t.Helper()
		if res, err := call(ctx, p, srv, "echo", id); err != nil || res.IsError {
			t.Fatalf("call %s: %v %+v", id, err, res)
		}
	}
	traced("a")
	ts.Restart() // the server forgets the session
	rec.install(ts.MCPServer())
	traced("b")
	root.End()
	// Outside any span: the call's own span is a root.
	mustCall(t, p, srv, "echo", "c")

	spans := exp.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	var calls, dials []tracetest.SpanStub
	for _, s := range spans {
		switch s.Name {
		case "tools/call echo":
			calls = append(calls, s)
		case "pool.dial", "pool.reinitialize":
			dials = append(dials, s)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("%d tools/call spans, want 3: %v", len(calls), names(spans))
	}
	for i, c := range calls[:2] {
		if c.Parent.SpanID() != root.SpanContext().SpanID() || c.SpanKind != trace.SpanKindClient {
			t.Errorf("call %d: parent %v kind %v, want the root, client", i, c.Parent.SpanID(), c.SpanKind)
		}
		want := "00-" + c.SpanContext.TraceID().String() + "-" + c.SpanContext.SpanID().String() + "-01"
		id := []string{"a", "b"}[i]
		if got := rec.get(id); len(got) == 0 || got[len(got)-1] != want {
			t.Errorf("call %s: the server saw traceparent %q, want %q", id, got, want)
		}
	}
	if calls[2].Parent.IsValid() {
		t.Errorf("call c has parent %v, want a root span", calls[2].Parent.SpanID())
	}
	if got := rec.get("c"); len(got) != 1 || got[0] != "00-"+calls[2].SpanContext.TraceID().String()+"-"+calls[2].SpanContext.SpanID().String()+"-01" {
		t.Errorf("call c: traceparent %q, want its own span's", got)
	}

	if len(dials) != 2 || dials[0].Name != "pool.dial" || dials[1].Name != "pool.reinitialize" {
		t.Fatalf("session spans %v, want pool.dial then pool.reinitialize", names(dials))
	}
	if dials[0].Parent.SpanID() != calls[0].SpanContext.SpanID() || dials[1].Parent.SpanID() != calls[1].SpanContext.SpanID() {
		t.Errorf("the dial spans are not under the calls that needed them")
	}
}

func names(spans []tracetest.SpanStub) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestTracingDefaultGlobal: on otel's default global provider (no SDK) the
// pool starts no request span (see otelDefault), and a call made under a
// remote span context still hands that one on as _meta.traceparent, as the
// default's pass-through span did. passthrough tells the default from a
// provider that makes spans.
func TestTracingDefaultGlobal(t *testing.T) {
	if otelDefault == nil || otel.GetTracerProvider() != otelDefault {
		t.Skip("a TracerProvider is set globally in this process")
	}
	sdk := sdktrace.NewTracerProvider()
	t.Cleanup(func() { sdk.Shutdown(context.Background()) })
	if passthrough(sdk) != nil {
		t.Error("passthrough(an SDK provider) is not nil: the pool would skip its spans")
	}
	ts := newTestServer(t, false)
	rec := &metaRecorder{seen: map[string][]string{}}
	rec.install(ts.MCPServer())
	p := newTestPool(t, nil)
	if p.traces() {
		t.Fatal("a pool on otel's default provider starts request spans")
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x0a, 1}, SpanID: trace.SpanID{0x0b, 2}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	if res, err := call(ctx, p, server(ts, "test"), "echo", "r"); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	want := "00-" + remote.TraceID().String() + "-" + remote.SpanID().String() + "-01"
	if got := rec.get("r"); len(got) != 1 || got[0] != want {
		t.Errorf("the server saw traceparent %q, want the caller's %q", got, want)
	}
}
