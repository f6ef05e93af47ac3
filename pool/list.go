package pool

// Lists are bounded. A list method (tools, resources, resource templates,
// prompts) returns one page per request and a nextCursor while there are
// more; the pool follows it to return every item. A server that always
// returns a cursor held a caller until its own deadline (986 tools/list
// requests in 3 s, reported as outcome_unknown), and one that lists 20,000
// tools took an agent from 32 to 214 MB, all of it sent to the model every
// step. So every list stops, with a *ListError, at:
//
//   - a cursor the server returned before in the same list (a loop: it
//     would never end);
//   - maxListPages pages (a server that makes up a new cursor each time);
//   - for tools, maxToolsPerServer (2,000) tools in all: an error, not a truncated
//     list, because a model given part of a server's tools would act on a
//     server it sees only in part, and a person should see why.
//
// The loop is written once, in listAll, for every list.

import (
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
)

// maxListPages bounds the pages of one list. go-sdk's servers send 1,000
// items a page (mcp.DefaultPageSize), so this is a million items at that
// size, and a thousand for a server that sends one a page; following a
// cursor for ever costs at most this many requests.
const maxListPages = 1000

// maxToolsPerServer bounds the tools the pool keeps of one server. Real
// servers list tens, and no model chooses among thousands (OpenAI's API
// takes at most 128 tools in a request); it is twice go-sdk's page size, so
// that a server just past one page still lists. 20,000 tools cost an agent
// 182 MB (about 9 kB a tool); this keeps a server's list near 18 MB at most.
// A list past it fails (a *ListError).
const maxToolsPerServer = 2000

// ErrListTooLong is wrapped (in a *ListError) by the error of a list the
// pool stopped following: its cursors loop, or it has more pages or tools
// than the pool keeps. It is a KindRefused error: listing again gets the
// same answer, and nothing of the list is returned.
var ErrListTooLong = errors.New("list past the pool's bounds")

// A ListError is a list the pool stopped: the server, the method, how far
// it got, and why.
type ListError struct {
	Server string // the Server's Name
	Method string // "tools/list", "resources/list", "resources/templates/list", "prompts/list"
	Pages  int    // the page at which it stopped (pages received)
	Items  int    // items received
	Why    string // what was wrong, in words
}

func (e *ListError) Error() string {
	return fmt.Sprintf("server %q: %s stopped at page %d (%d items so far): %s", e.Server, e.Method, e.Pages, e.Items, e.Why)
}

func (e *ListError) Unwrap() error { return ErrListTooLong }

// listAll returns every item of a list of srv by method: page fetches the
// page at a cursor ("" for the first) and returns its items and its
// nextCursor. maxItems, when positive, bounds the items in all.
//
// The cursors seen are kept as hashes, not strings: a server that sends
// megabyte cursors must not make the loop check cost megabytes per page. A
// hash collision would stop a list early with a clear error, with odds of
// about 2^-45 at maxListPages.
func listAll[T any](srv *Server, method string, maxItems int, page func(cursor string) ([]T, string, error)) ([]T, error) {
	var all []T
	seed := maphash.MakeSeed()
	seen := make(map[uint64]struct{})
	stop := func(pages int, why string, args ...any) error {
		return &ListError{Server: srv.Name, Method: method, Pages: pages, Items: len(all), Why: fmt.Sprintf(why, args...)}
	}
	cursor := ""
	for pages := 1; ; pages++ {
		items, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if maxItems > 0 && len(all) > maxItems {
			noun := strings.TrimSuffix(method, "/list")
			return nil, stop(pages, "more than %d %s; the pool keeps at most %d %s of one server", maxItems, noun, maxItems, noun)
		}
		if next == "" {
			return all, nil
		}
		h := maphash.String(seed, next)
		if _, again := seen[h]; again {
			return nil, stop(pages, "the server returned a cursor it had returned before, so the list would never end")
		}
		if pages >= maxListPages {
			return nil, stop(pages, "the server still returned a cursor after %d pages, the most the pool follows", maxListPages)
		}
		seen[h] = struct{}{}
		cursor = next
	}
}
