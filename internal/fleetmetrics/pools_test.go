package fleetmetrics

import (
	"reflect"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestPoolFromFamiliesReadsIdempotency: an agent's pool counters, as its
// /metrics exposes them, reach the page, including the idempotency events
// that live in one labelled family.
func TestPoolFromFamiliesReadsIdempotency(t *testing.T) {
	const text = `# TYPE switchboard_pool_dials_total counter
switchboard_pool_dials_total 4
# TYPE switchboard_pool_idempotency_total counter
switchboard_pool_idempotency_total{event="keyed_call"} 9
switchboard_pool_idempotency_total{event="replay"} 3
switchboard_pool_idempotency_total{event="conflict"} 1
switchboard_pool_idempotency_total{event="interrupted"} 2
# TYPE switchboard_pool_sessions_by_protocol gauge
switchboard_pool_sessions_by_protocol{protocol="2026-07-28"} 2
switchboard_pool_sessions_by_protocol{protocol="2025-11-25"} 1
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var list []*dto.MetricFamily
	for _, f := range fams {
		list = append(list, f)
	}
	got := poolFromFamilies("oracle", list)
	want := studioapi.PoolInfo{Process: "oracle", Dials: 4, Replays: 3, Conflicts: 1, Interrupted: 2,
		Protocols: map[string]int64{"2026-07-28": 2, "2025-11-25": 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("poolFromFamilies = %+v, want %+v", got, want)
	}
}
