package fleetmetrics_test

import (
	"net/url"
	"testing"

	"github.com/switchboard-run/switchboard/internal/fleetmetrics"
)

// TestBeside: an agent's /metrics and /healthz are beside its MCP
// endpoint, without its query (which may carry a credential).
func TestBeside(t *testing.T) {
	for _, tc := range []struct{ endpoint, name, want string }{
		{"http://127.0.0.1:8080/mcp", "metrics", "http://127.0.0.1:8080/metrics"},
		{"http://packrat.default.svc:8080/mcp?tenant=x#frag", "healthz", "http://packrat.default.svc:8080/healthz"},
		{"https://gw.example/agents/packrat/mcp", "metrics", "https://gw.example/agents/packrat/metrics"},
		{"http://h:1", "healthz", "http://h:1/healthz"},
	} {
		u, err := url.Parse(tc.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if got := fleetmetrics.Beside(u, tc.name).String(); got != tc.want {
			t.Errorf("Beside(%s, %s) = %s, want %s", tc.endpoint, tc.name, got, tc.want)
		}
		if u.String() != tc.endpoint {
			t.Errorf("Beside changed its argument to %s", u)
		}
	}
}
