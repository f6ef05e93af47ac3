package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-run/switchboard/internal/askcmd"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/telemetry"
	"github.com/switchboard-run/switchboard/internal/testbin"
)

var (
	switchboardBin string
	moduleRoot     string
)

func TestMain(m *testing.M) { testbin.Main{Bin: &switchboardBin, Root: &moduleRoot}.Run(m) }

// span is one finished span, from this process's in-memory exporter or
// from an agent process through OTLP, in one comparable form.
type span struct {
	Service, Name, Kind string
	TraceID, ID, Parent string // hex; Parent "" for a root
	Attrs               map[string]string
}

func (s span) String() string {
	return fmt.Sprintf("%s %q (%s) %s<-%s", s.Service, s.Name, s.Kind, s.ID, s.Parent)
}

// otlpReceiver is an OTLP/HTTP trace endpoint (protobuf) that keeps what it
// is sent: the agent processes export there, as to a collector.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []span
	arrived chan struct{} // a token after each export
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []span
	for _, rs := range ex.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := span{
					Service: service, Name: sp.GetName(), Kind: otlpKind(sp.GetKind()),
					TraceID: hex.EncodeToString(sp.GetTraceId()), ID: hex.EncodeToString(sp.GetSpanId()),
					Parent: hex.EncodeToString(sp.GetParentSpanId()), Attrs: map[string]string{},
				}
				for _, kv := range sp.GetAttributes() {
					s.Attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
				}
				got = append(got, s)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

func (r *otlpReceiver) snapshot() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]span(nil), r.spans...)
}

func otlpKind(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	}
	return "internal"
}

func fromStubs(stubs tracetest.SpanStubs) []span {
	var out []span
	for _, s := range stubs {
		sp := span{
			Service: "test", Name: s.Name, Kind: s.SpanKind.String(),
			TraceID: s.SpanContext.TraceID().String(), ID: s.SpanContext.SpanID().String(), Attrs: map[string]string{},
		}
		if s.Parent.IsValid() {
			sp.Parent = s.Parent.SpanID().String()
		}
		for _, kv := range s.Attributes {
			sp.Attrs[string(kv.Key)] = kv.Value.String()
		}
		out = append(out, sp)
	}
	return out
}

// TestOneTraceAcrossAgents: one `switchboard ask` through a studio, whose
// coordinator (a real agent process) delegates to a sibling (another real
// agent process), is one trace: this process's spans (the ask, its
// tools/call) go to an in-memory exporter, the agents' spans reach an OTLP
// receiver because OTEL_EXPORTER_OTLP_ENDPOINT is set for them, and the
// W3C traceparent in each tools/call's _meta links the three.
func TestOneTraceAcrossAgents(t *testing.T) {
	recv := &otlpReceiver{arrived: make(chan struct{}, 1)}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "test"))))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		tp.Shutdown(context.Background())
	})

	dir := projecttest.New(t, "oracle", "abacus")
	agentLogs := &syncBuf{}
	s, err := studio.Start(t.Context(), &studio.Options{
		Dir: dir, Listen: "127.0.0.1:0", Executable: switchboardBin, AgentOutput: agentLogs,
		Env: []string{
			telemetry.EnvOTLPEndpoint + "=" + collector.URL,
			"OTEL_BSP_SCHEDULE_DELAY=50", // export each span batch promptly
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("agents' output:\n%s", agentLogs.String())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := askcmd.Main(t.Context(), []string{"--studio", s.URL(), "calculate 17 * 3"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "51") {
		t.Fatalf("switchboard ask: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}

	local := fromStubs(exp.GetSpans())
	var root span
	for _, sp := range local {
		if sp.Name == "switchboard ask" {
			root = sp
		}
	}
	if root.ID == "" {
		t.Fatalf("no switchboard ask span in this process: %v", local)
	}
	// The agents export in batches; wait until the sibling's server span of
	// this trace has arrived, and the coordinator's (it ends last).
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	var spans []span
	for {
		spans = append(local, recv.snapshot()...)
		if find(spans, root.TraceID, "abacus", "tools/call calculate", "server") != nil &&
			find(spans, root.TraceID, "oracle", "tools/call ask", "server") != nil {
			break
		}
		select {
		case <-recv.arrived:
		case <-deadline.C:
			t.Fatalf("the agents' spans of trace %s did not arrive; have:\n%s", root.TraceID, dump(spans))
		}
	}

	byID := map[string]span{}
	for _, sp := range spans {
		if sp.TraceID == root.TraceID {
			byID[sp.ID] = sp
		}
	}
	// want: each span (service, name, kind) and its parent's.
	chain := []struct {
		service, name, kind string
		parent              [3]string
	}{
		{"test", "tools/call ask", "client", [3]string{"test", "switchboard ask", "internal"}},
		{"test", "pool.dial", "internal", [3]string{"test", "tools/call ask", "client"}},
		{"oracle", "tools/call ask", "server", [3]string{"test", "tools/call ask", "client"}},
		{"oracle", "chat builtin", "client", [3]string{"oracle", "tools/call ask", "server"}},
		{"oracle", "execute_tool abacus__calculate", "internal", [3]string{"oracle", "tools/call ask", "server"}},
		{"oracle", "tools/call calculate", "client", [3]string{"oracle", "execute_tool abacus__calculate", "internal"}},
		{"oracle", "tools/list", "client", [3]string{"oracle", "tools/call ask", "server"}},
		{"abacus", "tools/call calculate", "server", [3]string{"oracle", "tools/call calculate", "client"}},
	}
	for _, c := range chain {
		sp := find(spans, root.TraceID, c.service, c.name, c.kind)
		if sp == nil {
			t.Errorf("no %s span %q (%s) in the trace", c.service, c.name, c.kind)
			continue
		}
		p, ok := byID[sp.Parent]
		if !ok || p.Service != c.parent[0] || p.Name != c.parent[1] || p.Kind != c.parent[2] {
			t.Errorf("%s %q: parent %v, want %s %q (%s)", c.service, c.name, p, c.parent[0], c.parent[1], c.parent[2])
		}
	}
	if n := count(spans, root.TraceID, "oracle", "chat builtin"); n != 2 {
		t.Errorf("%d model calls in the coordinator, want 2 (the delegation, then the answer)", n)
	}
	if sp := find(spans, root.TraceID, "oracle", "tools/call ask", "server"); sp != nil && sp.Attrs["switchboard.run_id"] == "" {
		t.Errorf("the coordinator's span does not name the run: %v", sp.Attrs)
	}
	// Nothing of this ask escaped into another trace.
	for _, sp := range spans {
		if sp.TraceID != root.TraceID && (sp.Name == "tools/call calculate" || sp.Name == "tools/call ask") {
			t.Errorf("span outside the ask's trace: %v", sp)
		}
	}
	if t.Failed() {
		t.Logf("spans:\n%s", dump(spans))
	}
}

func find(spans []span, traceID, service, name, kind string) *span {
	for i := range spans {
		s := &spans[i]
		if s.TraceID == traceID && s.Service == service && s.Name == name && (kind == "" || s.Kind == kind) {
			return s
		}
	}
	return nil
}

func count(spans []span, traceID, service, name string) int {
	n := 0
	for _, s := range spans {
		if s.TraceID == traceID && s.Service == service && s.Name == name {
			n++
		}
	}
	return n
}

func dump(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s\n", s.TraceID[:8], s)
	}
	return b.String()
}

type syncBuf = proctest.SyncBuffer
