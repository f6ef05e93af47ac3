package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/proxy"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// BenchmarkHop measures the studio's hop: a packrat get_note called
// directly at the agent's own address, and through the studio's proxy
// (/api/agents/packrat/mcp), for a small note and for one whose result is
// about 1 MB (a 512 KiB note: its text is in the content and in the
// structured result). The agent is a real `agent serve` process; the
// studio runs in this process. The client is a plain HTTP client posting
// sessionless (2026-07-28) calls, so that its own cost is small and the
// same in every variant.
//
//   - direct: the agent's address, no studio.
//   - studio: through the studio, as it is (keep-alive to the agent).
//   - studio-dial: through the studio with its transport to the agent
//     dialling every request, as it did before keep-alive.
//
// Each reports cpu-us/op, the CPU time of this process (client and, for
// the studio variants, the studio) per call, from getrusage; the studio
// variants also report studio-cpu-us/op, their cpu-us/op less that of the
// same number of direct calls made in the same run (untimed, before). c1
// is one caller, c64 sixty-four, c256 two hundred and fifty-six: the
// throughput at 256 callers (1e9 / ns/op, calls per second) is to be no
// less than at 64. The 2mb case (a 1 MiB note, packrat's largest: a
// result of about 2 MB) at 16 callers shows that large results complete
// through the studio under concurrency.
//
//	go run ./internal/benchratio/rounds -n 7 -pkg ./internal/studio -bench Hop \
//		-variants direct,studio,studio-dial -benchtime 2s | go run ./internal/benchratio -baseline direct
func BenchmarkHop(b *testing.B) {
	for _, variant := range []string{"direct", "studio", "studio-dial"} {
		b.Run(variant, func(b *testing.B) {
			var opts Options
			var dial *http.Transport
			if variant == "studio-dial" {
				dial = proxy.NewTransport()
				dial.DisableKeepAlives = true
				opts.wrapUpstream = func(http.RoundTripper) http.RoundTripper { return dial }
			}
			s := benchStudio(b, projecttest.New(b, "packrat"), &opts)
			if dial != nil {
				defer dial.CloseIdleConnections()
			}
			st := s.agents["packrat"].proc.Status()
			if st.State != studioapi.StateRunning || st.Upstream == nil {
				b.Fatalf("packrat is %s", st.State)
			}
			direct := st.Upstream.String()
			through := s.AgentURL("packrat")
			tr := &http.Transport{MaxIdleConnsPerHost: 512, Proxy: nil} // above the most callers: no churn
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			small := storeNote(b, hc, direct, "a small note")
			large := storeNote(b, hc, direct, strings.Repeat("0123456789abcdef", 512<<10/16))
			huge := storeNote(b, hc, direct, strings.Repeat("0123456789abcdef", 1<<20/16)) // packrat's largest
			for _, c := range []struct {
				name    string
				id      int
				callers []int
			}{{"small", small, []int{1, 64, 256}}, {"1mb", large, []int{1, 64}}, {"2mb", huge, []int{16}}} {
				for _, callers := range c.callers {
					b.Run(fmt.Sprintf("%s-c%d", c.name, callers), func(b *testing.B) {
						url := through
						if variant == "direct" {
							url = direct
						}
						body := getNote(c.id)
						call(b, hc, url, body) // warm the connections
						var base time.Duration
						if variant != "direct" {
							// The client's share, on the same calls, not timed.
							b.StopTimer()
							t0 := cpuTime()
							run(b, b.N, callers, func() { call(b, hc, direct, body) })
							base = cpuTime() - t0
							b.StartTimer()
						}
						t0 := cpuTime()
						b.ResetTimer()
						run(b, b.N, callers, func() { call(b, hc, url, body) })
						b.StopTimer()
						used := cpuTime() - t0
						b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-us/op")
						if variant != "direct" {
							b.ReportMetric(float64((used-base).Microseconds())/float64(b.N), "studio-cpu-us/op")
						}
					})
				}
			}
		})
	}
}

// benchStudio is startStudio for a benchmark.
func benchStudio(b *testing.B, dir string, opts *Options) *Studio {
	b.Helper()
	o := *opts
	o.Dir = dir
	o.Listen = "127.0.0.1:0"
	o.Executable = switchboardBin
	o.AgentOutput = io.Discard
	s, err := Start(b.Context(), &o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	s.WaitReady(ctx)
	return s
}

// run makes n calls from callers goroutines.
func run(b *testing.B, n, callers int, f func()) {
	var wg sync.WaitGroup
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range min(callers, n) {
		wg.Go(func() {
			for range next {
				f()
			}
		})
	}
	wg.Wait()
}

// cpuTime is this process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const sessionlessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func getNote(id int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_note","arguments":{"id":%d},%s}}`, id, sessionlessMeta)
}

// post sends one sessionless tools/call and returns its response body.
func post(b *testing.B, hc *http.Client, url, tool string, body []byte) []byte {
	req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcphttp.ProtocolVersionHeader, mcphttp.EraVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %d %v: %.300s", tool, resp.StatusCode, err, out)
	}
	return out
}

// call gets a note and checks that the answer is a result.
func call(b *testing.B, hc *http.Client, url string, body []byte) {
	out := post(b, hc, url, "get_note", body)
	if !bytes.Contains(out, []byte(`"result"`)) || bytes.Contains(out, []byte(`"isError":true`)) {
		b.Fatalf("get_note: %.300s", out)
	}
}

// storeNote stores text in packrat and returns the note's id.
func storeNote(b *testing.B, hc *http.Client, url, text string) int {
	args, _ := json.Marshal(map[string]string{"text": text})
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_note","arguments":%s,%s}}`, args, sessionlessMeta)
	out := post(b, hc, url, "store_note", body)
	if i := bytes.Index(out, []byte("data: ")); i >= 0 {
		out = bytes.TrimSpace(out[i+len("data: "):])
	}
	var m struct {
		Result struct {
			Structured struct {
				ID int `json:"id"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.Result.Structured.ID == 0 {
		b.Fatalf("store_note: %v: %.300s", err, out)
	}
	return m.Result.Structured.ID
}
