package hostilesuite

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// Planted secrets: in the environment of the studio (and so of every agent)
// under names the redaction knows, and looked for in every output.
var planted = []string{
	"sk-hostile-planted-0123456789abcdef",
	"tok-hostile-planted-fedcba9876543210",
}

func plantedEnv() []string {
	return []string{
		"OPENAI_API_KEY=" + planted[0],
		"HOSTILE_PLANTED_TOKEN=" + planted[1],
	}
}

// fleet is one `switchboard up` with the bundled agents.
type fleet struct {
	t        *testing.T
	dir      string
	studio   *proctest.Process
	url      string // the studio's base URL
	agent    string // the attacked agent
	agentPID int
	direct   string // the agent's own MCP endpoint, bypassing the studio
	token    string // the studio's bearer token, "" when it has none
	hc       *http.Client
}

var serveAddr = regexp.MustCompile(`agent serving.*addr=(127\.0\.0\.1:\d+)`)

// startFleet runs `switchboard up` on a free loopback port in a fresh copy
// of the bundled project and waits until agent is running.
// A token (non-empty) runs the studio in token mode.
func startFleet(t *testing.T, agent, token string, env ...string) *fleet {
	t.Helper()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	if token != "" {
		env = append(env, "SWITCHBOARD_TOKEN="+token)
	}
	p := proctest.StartProcess(t, dir, append(plantedEnv(), env...), 60*time.Second,
		"switchboard studio listening on ", switchboardBin, "up", "--listen", "127.0.0.1:0")
	f := &fleet{t: t, dir: dir, studio: p, url: strings.TrimSpace(p.Ready), agent: agent, token: token,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}}
	t.Cleanup(func() {
		f.hc.CloseIdleConnections()
		p.Signal(interrupt)
		if _, err := p.Wait(20 * time.Second); err != nil {
			t.Errorf("switchboard up did not exit: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		if pid := f.agentPIDNow(ctx); pid != 0 {
			if m := agentAddr(p.Stderr(), agent); m != "" {
				f.agentPID, f.direct = pid, "http://"+m+"/mcp"
				return f
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("agent %s not running within 30s\n%s", agent, p.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func agentAddr(stderr, agent string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if name, rest, ok := strings.Cut(line, "|"); ok && strings.TrimSpace(name) == agent {
			if m := serveAddr.FindStringSubmatch(rest); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

func (f *fleet) studioPID() int { return f.studio.Cmd.Process.Pid }

// agentPIDNow reads the agent's PID from /api/agents (0 while not running).
func (f *fleet) agentPIDNow(ctx context.Context) int {
	body, status, err := f.get(ctx, "/api/agents")
	if err != nil || status != http.StatusOK {
		return 0
	}
	var infos []struct {
		Name  string `json:"name"`
		State string `json:"state"`
		PID   int    `json:"pid"`
	}
	if json.Unmarshal(body, &infos) != nil {
		return 0
	}
	for _, a := range infos {
		if a.Name == f.agent && a.State == "running" {
			return a.PID
		}
	}
	return 0
}

func (f *fleet) get(ctx context.Context, path string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+path, nil)
	if err != nil {
		return nil, 0, err
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	res, err := f.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	return body, res.StatusCode, err
}

func (f *fleet) agentURL() string { return f.url + "/api/agents/" + f.agent + "/mcp" }

// client is a raw MCP client of url on its own keep-alive connections.
func (f *fleet) client(url string) *mcphttptest.Client {
	c := &mcphttptest.Client{URL: url, HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
	if f.token != "" {
		c.Header = map[string]string{"Authorization": "Bearer " + f.token}
	}
	return c
}

// outputs is everything a person or a client can read from the fleet: its
// logs (the studio's and every agent's), its APIs and its metrics.
func (f *fleet) outputs(ctx context.Context) string {
	var b strings.Builder
	b.WriteString(f.studio.Stderr())
	for _, p := range []string{"/api/agents", "/api/overview", "/api/delegations?limit=200", "/metrics"} {
		body, _, _ := f.get(ctx, p)
		b.Write(body)
	}
	return b.String()
}

// secretsIn counts the planted secrets in s.
func secretsIn(s string) int {
	n := 0
	for _, p := range planted {
		n += strings.Count(s, p)
	}
	return n
}

func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(len(s)-1, i))]
}
