package pool_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
)

// pager is a receiving middleware that answers every list method itself,
// as a server that misbehaves would: each page has the items items() gives
// and the cursor cursor(n) gives for the n-th request of that method
// (counted from 1). It counts the requests per method.
type pager struct {
	cursor func(n int) string
	items  int

	mu    sync.Mutex
	calls map[string]int
}

func (pg *pager) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		pg.mu.Lock()
		pg.calls[method]++
		n := pg.calls[method]
		pg.mu.Unlock()
		c := pg.cursor(n)
		switch method {
		case "tools/list":
			res := &mcp.ListToolsResult{NextCursor: c, Tools: []*mcp.Tool{}}
			for i := range pg.items {
				res.Tools = append(res.Tools, &mcp.Tool{Name: fmt.Sprintf("t%d_%d", n, i), InputSchema: map[string]any{"type": "object"}})
			}
			return res, nil
		case "resources/list":
			return &mcp.ListResourcesResult{NextCursor: c, Resources: []*mcp.Resource{{Name: "r", URI: "file:///r" + strconv.Itoa(n)}}}, nil
		case "resources/templates/list":
			return &mcp.ListResourceTemplatesResult{NextCursor: c, ResourceTemplates: []*mcp.ResourceTemplate{{Name: "t", URITemplate: "file:///{x}"}}}, nil
		case "prompts/list":
			return &mcp.ListPromptsResult{NextCursor: c, Prompts: []*mcp.Prompt{{Name: "p" + strconv.Itoa(n)}}}, nil
		}
		return next(ctx, method, req)
	}
}

func (pg *pager) requests(method string) int {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.calls[method]
}

func pagedServer(t *testing.T, pg *pager) (*pool.Pool, *pool.Server) {
	t.Helper()
	pg.calls = map[string]int{}
	ts := mcptest.Start(t, &mcptest.Options{Middleware: pg.middleware})
	p := pool.New(&pool.Options{ToolsTTL: -1})
	t.Cleanup(func() { p.Close() })
	return p, &pool.Server{Name: "pages", URL: ts.URL(), ProtocolVersion: pool.Protocol20251125}
}

// every list method, through the pool
var lists = []struct {
	method string
	list   func(context.Context, *pool.Pool, *pool.Server) (int, error)
}{
	{"tools/list", func(ctx context.Context, p *pool.Pool, s *pool.Server) (int, error) {
		r, err := p.ListTools(ctx, s)
		return len(r), err
	}},
	{"resources/list", func(ctx context.Context, p *pool.Pool, s *pool.Server) (int, error) {
		r, err := p.ListResources(ctx, s)
		return len(r), err
	}},
	{"resources/templates/list", func(ctx context.Context, p *pool.Pool, s *pool.Server) (int, error) {
		r, err := p.ListResourceTemplates(ctx, s)
		return len(r), err
	}},
	{"prompts/list", func(ctx context.Context, p *pool.Pool, s *pool.Server) (int, error) {
		r, err := p.ListPrompts(ctx, s)
		return len(r), err
	}},
}

// checkStopped checks that err is the pool stopping method's list, typed,
// naming the server and the method, after pages pages.
func checkStopped(t *testing.T, err error, method string, pages int) *pool.ListError {
	t.Helper()
	var pe *pool.Error
	var le *pool.ListError
	if !errors.As(err, &pe) || pe.Kind != pool.KindRefused || !errors.As(err, &le) || !errors.Is(err, pool.ErrListTooLong) {
		t.Fatalf("%s: want a refused *pool.ListError, got %v", method, err)
	}
	if le.Server != "pages" || le.Method != method || le.Pages != pages || pe.Method != method || pe.Retried {
		t.Fatalf("%s: stopped as %+v (pool error %+v), want after %d pages", method, le, pe, pages)
	}
	return le
}

// A server that returns the same cursor again is stopped at the page that
// repeats it, for every list method; the session stays usable.
func TestListStopsAtARepeatedCursor(t *testing.T) {
	for _, l := range lists {
		t.Run(l.method, func(t *testing.T) {
			// "a", "b", then "a" again.
			pg := &pager{items: 1, cursor: func(n int) string { return string(rune('a' + (n-1)%2)) }}
			p, srv := pagedServer(t, pg)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := l.list(ctx, p, srv)
			le := checkStopped(t, err, l.method, 3)
			if n := pg.requests(l.method); n != 3 {
				t.Fatalf("%d requests, want 3", n)
			}
			t.Logf("%v", le)
			if _, err := p.CallTool(ctx, srv, echoCall("after")); err != nil {
				t.Fatalf("the session after a stopped list: %v", err)
			}
			if st := p.Stats(); st.Dials != 1 || st.Invalidations != 0 || st.Retries != 0 {
				t.Fatalf("a stopped list cost the session: %+v", st)
			}
		})
	}
}

// A server that makes up a new cursor for every page is stopped after
// maxListPages (1,000) requests, not at the caller's deadline.
func TestListStopsAtThePageCap(t *testing.T) {
	pg := &pager{items: 1, cursor: func(n int) string { return "c" + strconv.Itoa(n) }}
	p, srv := pagedServer(t, pg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := p.ListPrompts(ctx, srv)
	checkStopped(t, err, "prompts/list", 1000)
	if n := pg.requests("prompts/list"); n != 1000 {
		t.Fatalf("%d requests, want 1000", n)
	}
}

// A list that ends is returned whole, across pages.
func TestListFollowsEndingCursors(t *testing.T) {
	for _, l := range lists {
		t.Run(l.method, func(t *testing.T) {
			pg := &pager{items: 1, cursor: func(n int) string {
				if n == 5 {
					return ""
				}
				return "c" + strconv.Itoa(n)
			}}
			p, srv := pagedServer(t, pg)
			n, err := l.list(context.Background(), p, srv)
			if err != nil || n != 5 {
				t.Fatalf("got %d items, %v; want 5 from 5 pages", n, err)
			}
		})
	}
}

// At most 2,000 tools of one server are kept: 2,000 are listed, 2,001 fail
// with an error that says so, whether in one page or across pages.
func TestToolsPerServerCap(t *testing.T) {
	for _, c := range []struct {
		name         string
		items, pages int
		ok           bool
	}{
		{"2000 in one page", 2000, 1, true},
		{"2001 in one page", 2001, 1, false},
		{"2000 in 4 pages", 500, 4, true},
		{"2500 in 5 pages", 500, 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pg := &pager{items: c.items, cursor: func(n int) string {
				if n == c.pages {
					return ""
				}
				return "c" + strconv.Itoa(n)
			}}
			p, srv := pagedServer(t, pg)
			tools, err := p.ListTools(context.Background(), srv)
			if c.ok {
				if err != nil || len(tools) != c.items*c.pages {
					t.Fatalf("got %d tools, %v; want %d", len(tools), err, c.items*c.pages)
				}
				return
			}
			le := checkStopped(t, err, "tools/list", c.pages)
			if le.Items <= 2000 || tools != nil {
				t.Fatalf("stopped with %d items and %d tools returned", le.Items, len(tools))
			}
			t.Logf("%v", err)
		})
	}
}
