package studio

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// The studio page, at / of `switchboard up`: the agents with their state and
// tools, each process's pool sessions, and the most recent delegations. The
// server renders it whole (it reads fine without JavaScript), then a small
// script polls /api/overview and redraws the tables, so delegations appear as
// they happen. Everything the page needs is embedded in the binary and
// served by the studio; the Content-Security-Policy allows nothing else, so
// the page cannot fetch from the network even by mistake.

//go:embed page
var pageFS embed.FS

// pageDelegations is how many recent delegations the page and
// /api/overview show.
const pageDelegations = 50

// contentSecurityPolicy allows the page its own script, style and API, and
// nothing from anywhere else.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var pageTemplate = template.Must(template.New("index.html").Funcs(template.FuncMap{
	"ms": func(v float64) string {
		if v >= 1000 {
			return fmt.Sprintf("%.2f s", v/1000)
		}
		return fmt.Sprintf("%.1f ms", v)
	},
	"short": func(s string) string {
		if len(s) > 8 {
			return s[:8]
		}
		return s
	},
}).ParseFS(pageFS, "page/index.html"))

// Overview is everything the page shows: GET /api/overview.
type Overview struct {
	URL         string       `json:"url"`
	Time        time.Time    `json:"time"`
	Agents      []AgentInfo  `json:"agents"`
	Pools       []PoolInfo   `json:"pools"`
	Delegations []Delegation `json:"delegations"`
}

// Overview gathers the agents (with their tools), the pools and the recent
// delegations.
func (s *Studio) Overview(ctx context.Context) Overview {
	return Overview{
		URL:         s.url,
		Time:        time.Now(),
		Agents:      s.ListAgents(ctx),
		Pools:       s.Pools(ctx),
		Delegations: s.Delegations(pageDelegations),
	}
}

func (s *Studio) servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET / is the studio page")
		return
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, s.Overview(r.Context())); err != nil {
		s.logger.Error("rendering the studio page", "err", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// testHookOverview runs before /api/overview answers; the browser test
// holds the page's first poll in it while it makes a delegation.
var testHookOverview = func() {}

func (s *Studio) serveOverview(w http.ResponseWriter, r *http.Request) {
	testHookOverview()
	mcphttp.WriteJSON(w, http.StatusOK, s.Overview(r.Context()))
}

var staticFS = func() http.Handler {
	sub, err := fs.Sub(pageFS, "page")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}()

// serveStatic serves the page's script and style sheet (not its template).
func (s *Studio) serveStatic(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/static/")
	if name != "studio.css" && name != "studio.js" {
		notFound(w, r.URL.EscapedPath())
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
