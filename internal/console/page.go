package console

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// The studio's pages: / (the fleet: agents, pools, runs, recent
// delegations), /runs/<id> (a run's task, answer and waterfall) and
// /agents/<name> (an agent's state, history, charts, tools, logs). The
// server renders each page whole, so it reads fine without JavaScript; a
// small script (page/studio.js) keeps the part of the page marked live
// current by fetching the same page's live part again (?fragment=1) when
// its ETag changes, draws the charts, and drives the buttons and the tool
// forms. One renderer, the templates, so the page and its updates cannot
// disagree. Everything the page needs is embedded and served by the
// studio; the Content-Security-Policy allows nothing else, so the page
// cannot fetch from the network even by mistake.

//go:embed page
var pageFS embed.FS

// pageDelegations is how many recent delegations the page and
// /api/overview show.
const pageDelegations = 50

// pageRuns is how many runs the fleet page lists.
const pageRuns = 50

// contentSecurityPolicy allows the page its own script, style and API, and
// nothing from anywhere else. form-action 'self' lets the run filter (a GET
// form) work without the script.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// timeLayout shows a time with its date and zone.
const timeLayout = "2006-01-02 15:04:05 MST"

func fmtMS(v float64) string {
	switch {
	case v >= 60000:
		return fmt.Sprintf("%.1f min", v/60000)
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.1f ms", v)
}

var pageTemplate = template.Must(template.New("").Funcs(template.FuncMap{
	"ms": fmtMS,
	"short": func(s string) string {
		if len(s) > 8 {
			return s[:8]
		}
		return s
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format(timeLayout)
	},
	"iso":    func(t time.Time) string { return t.Format(time.RFC3339Nano) },
	"indent": indentJSON,
	"badge": func(d studioapi.Delegation) []string {
		b, t := observe.Badge(d)
		return []string{b, t}
	},
	"dict": func(kv ...any) map[string]any {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
	"list": func(v ...string) []string { return v },
	"zero": zeroPool,
	"auth": authstate.Describe,
}).Funcs(usageFuncs).ParseFS(pageFS, "page/*.html"))

// Overview gathers the agents (with their tools), the pools and the recent
// delegations.
func (s *Console) Overview(ctx context.Context) studioapi.Overview {
	return studioapi.Overview{
		URL:         s.URL,
		Time:        time.Now(),
		Agents:      s.ListAgents(ctx),
		Pools:       s.Pools(ctx),
		Delegations: s.Delegations.Recent(pageDelegations),
	}
}

// fleetPage is the template data of /.
type fleetPage struct {
	studioapi.Overview
	Auth   authstate.Report // the agents' OAuth servers (Options.Auth)
	ETag   string
	Runs   studioapi.RunList
	Filter observe.RunFilter
	Names  []string
	Query  string // the filter as a query string, for the next page's link
	// TokenMode: the studio has a token, so the ask box offers to sign out.
	TokenMode bool
}

// runPage is the template data of /runs/<id>.
type runPage struct {
	URL  string
	Time time.Time
	ETag string
	studioapi.Run
	Rows  []waterfallRow
	Ticks []tick
	// Prev and Next are the ?from= of the neighbouring pages of hops, -1
	// when there is none.
	Prev, Next int
	// Journal is the run in its agent's journal, when it holds it
	// (journal.go); Resumes are the attempts of the run's ask that went
	// on from it.
	Journal *studioapi.JournalRun
	Resumes []resumedAttempt
}

// waterfallRow is one hop's bar: x and widths in the SVG's 0..1000 units.
type waterfallRow struct {
	studioapi.Hop
	N                   int
	X, W, HeldX, HeldW  float64
	Indent              int
	ArgumentsIndented   string
	ResultIndented      string
	FromLabel, Duration string
	Spans               []span // runs.go: the ask's model steps and unproxied calls
}

type tick struct {
	X     float64
	Label string
}

// agentPage is the template data of /agents/<name>.
type agentPage struct {
	URL  string
	Time time.Time
	ETag string
	studioapi.AgentDetail
	Runs studioapi.RunList
	// Journal is the agent's journaled runs (journal.go); JournalError
	// why they could not be read.
	Journal      studioapi.JournalRuns
	JournalError string
	TokenMode    bool // the ask box offers to sign out
	// Servers are the servers its tools/mcp.json names, each linked to
	// its inspector (inspector.go).
	Servers []InspectServer
}

// ServePage serves the pages: /, /runs, /runs/<id> and /agents/<name>.
func (s *Console) ServePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+r.URL.EscapedPath()+" is a studio page")
		return
	}
	path := r.URL.EscapedPath()
	fragment := r.URL.Query().Get("fragment") == "1"
	var name string
	var data any
	var etag string
	var err error
	switch {
	case path == "/" || path == "/runs":
		f, err := runFilterFrom(r)
		if err != nil {
			mcphttp.WriteJSONError(w, http.StatusBadRequest, err.Error())
			return
		}
		if f.Limit == 0 {
			f.Limit = pageRuns
		}
		// A sign-in happens outside the studio (switchboard login): the
		// ETag names the sign-in state too, so the page shows it.
		auth := s.authState()
		etag = s.pageETag("fleet", s.fleetVersion()+authVersion(auth))
		if notModified(w, r, etag) {
			return
		}
		q := r.URL.Query()
		q.Del("fragment")
		q.Del("before")
		data = fleetPage{Overview: s.Overview(r.Context()), Auth: auth, ETag: etag, Runs: s.Runs.Page(f), Filter: f, Names: s.Names, Query: q.Encode(), TokenMode: s.Token != ""}
		name = "index"
	case strings.HasPrefix(path, "/runs/"):
		id := strings.TrimPrefix(path, "/runs/")
		etag = s.pageETag("run", "")
		if notModified(w, r, etag) {
			return
		}
		from, err := hopsFrom(r)
		if err != nil {
			mcphttp.WriteJSONError(w, http.StatusBadRequest, err.Error())
			return
		}
		run, ok := s.Runs.RunFrom(id, from)
		if !ValidName(id) || !ok {
			s.pageNotFound(w, fmt.Sprintf("no run %q is recorded (the studio keeps the last %d calls)", id, observe.MaxCalls))
			return
		}
		p := newRunPage(s.URL, run)
		p.ETag = etag
		if _, known := s.Procs[run.Agent]; known {
			if jr, err := s.JournalRun(r.Context(), run.Agent, run.ID); err == nil {
				p.Journal = &jr
			}
		}
		data = p
		name = "run"
	case strings.HasPrefix(path, "/agents/") && strings.Contains(path, "/servers/"):
		agent, server, ok := inspectorPagePath(path)
		if _, known := s.Procs[agent]; !ok || !known || !ValidName(agent) {
			s.pageNotFound(w, fmt.Sprintf("no agent %q; known agents: %s", agent, strings.Join(s.Names, ", ")))
			return
		}
		in, err := s.inspect(agent, server)
		if err != nil {
			s.pageNotFound(w, err.Error())
			return
		}
		// Every view lists afresh (the pool caches tools/list for a
		// minute): nothing to compare an ETag with.
		etag = fmt.Sprintf(`"inspector-%d"`, time.Now().UnixNano())
		data = inspectorPage{URL: s.URL, Time: time.Now(), Inspection: in.Inspect(r.Context())}
		name = "inspector"
	case strings.HasPrefix(path, "/agents/"):
		agent := strings.TrimPrefix(path, "/agents/")
		if _, ok := s.Procs[agent]; !ok || !ValidName(agent) {
			s.pageNotFound(w, fmt.Sprintf("no agent %q; known agents: %s", agent, strings.Join(s.Names, ", ")))
			return
		}
		etag = s.pageETag("agent", s.agentVersion(agent))
		if notModified(w, r, etag) {
			return
		}
		d, _ := s.AgentDetail(r.Context(), agent)
		ap := agentPage{URL: s.URL, Time: time.Now(), ETag: etag, AgentDetail: d, Runs: s.Runs.Page(observe.RunFilter{Agent: agent, Limit: 10}), TokenMode: s.Token != "", Servers: s.InspectServers(agent)}
		if ap.Journal, err = s.JournalRuns(r.Context(), agent, "limit=20"); err != nil {
			ap.JournalError = err.Error()
		}
		data = ap
		name = "agent"
	default:
		NotFound(w, path)
		return
	}
	if fragment {
		name += "-live"
	}
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, name, data); err != nil {
		s.Logger.Error("rendering a studio page", "page", name, "err", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", etag)
	w.Write(buf.Bytes())
}

func (s *Console) pageNotFound(w http.ResponseWriter, msg string) {
	var buf bytes.Buffer
	pageTemplate.ExecuteTemplate(&buf, "notfound", map[string]string{"Message": msg})
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	w.Write(buf.Bytes())
}

// fleetVersion changes when anything the fleet page shows changes (the
// pools' numbers move with calls, which change the calls' version).
func (s *Console) fleetVersion() string {
	var b strings.Builder
	for _, n := range s.Names {
		b.WriteString(s.agentVersion(n))
		b.WriteByte(',')
	}
	return b.String()
}

// pageETag names what a page showed: the recorded calls' version, what
// else it depends on, and the minute (a running run's duration and the
// charts move with time).
func (s *Console) pageETag(kind, extra string) string {
	return fmt.Sprintf(`"%s-%d-%d-%x"`, kind, s.Runs.Version(), time.Now().Unix()/10, fnv32(extra))
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func notModified(w http.ResponseWriter, r *http.Request, etag string) bool {
	if r.Header.Get("If-None-Match") != etag {
		return false
	}
	w.Header().Set("ETag", etag)
	w.WriteHeader(http.StatusNotModified)
	return true
}

func newRunPage(url string, run studioapi.Run) runPage {
	p := runPage{URL: url, Time: time.Now(), Run: run, Prev: -1, Next: -1}
	if run.HopsFrom > 0 {
		p.Prev = max(run.HopsFrom-studioapi.MaxRunHops, 0)
	}
	if n := run.HopsFrom + len(run.Hops); n < run.HopsTotal {
		p.Next = n
	}
	total := run.DurationMS
	for _, h := range run.Hops {
		total = max(total, h.OffsetMS+h.DurationMS)
	}
	if total <= 0 {
		total = 1
	}
	scale := 1000 / total
	for i, h := range run.Hops {
		row := waterfallRow{Hop: h, N: run.HopsFrom + i + 1, Indent: min(h.Depth, 6)}
		row.X = h.OffsetMS * scale
		d := h.DurationMS
		if h.Outcome == studioapi.OutcomeRunning {
			d = total - h.OffsetMS
		}
		row.W = max(d*scale, 2)
		if row.X+row.W > 1000 {
			row.W = max(1000-row.X, 2)
		}
		if h.HeldMS > 0 {
			row.HeldX, row.HeldW = row.X, min(h.HeldMS*scale, row.W)
		}
		row.Spans = hopSpans(h, run.Start, scale)
		row.ArgumentsIndented = indentJSON(h.Arguments)
		row.ResultIndented = indentJSON(h.Result)
		row.FromLabel = h.From
		if row.FromLabel == "" {
			row.FromLabel = "client"
		}
		row.Duration = fmtMS(h.DurationMS)
		if h.Outcome == studioapi.OutcomeRunning {
			row.Duration = "running"
		}
		p.Rows = append(p.Rows, row)
	}
	p.Resumes = resumedAttempts(run.HopsFrom, run.Hops)
	for i := 0; i <= 4; i++ {
		p.Ticks = append(p.Ticks, tick{X: float64(i) * 250, Label: fmtMS(total * float64(i) / 4)})
	}
	return p
}

var staticFS = func() http.Handler {
	sub, err := fs.Sub(pageFS, "page")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}()

// ServeStatic serves the page's script and style sheet (not its templates).
func (s *Console) ServeStatic(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/static/")
	if name != "studio.css" && name != "studio.js" && name != "ask.js" && name != "inspector.js" {
		NotFound(w, r.URL.EscapedPath())
		return
	}
	pageHeaders(w)
	w.Header().Set("Cache-Control", "no-cache")
	staticFS.ServeHTTP(w, r)
}

func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// zeroPool reports whether a process's pool has seen no traffic at all, so
// the page names it on one line instead of a row of zeros.
func zeroPool(p studioapi.PoolInfo) bool {
	return reflect.DeepEqual(p, studioapi.PoolInfo{Process: p.Process})
}
