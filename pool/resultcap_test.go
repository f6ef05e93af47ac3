package pool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/pool"
)

// bigServer is a real go-sdk server whose tool "sized" answers with
// {"n": N} bytes of text. lengthKnown sends each JSON answer with its
// Content-Length (buffered whole first), as a server that knows it does.
func bigServer(t *testing.T, jsonResponse, lengthKnown bool) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "sized", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ N int }
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.N)}}}, nil
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
	if lengthKnown {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, r)
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})
	}
	// Cleanups run last first: the server closes, then its sessions.
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestResultCap: an answer larger than the server's MaxResultBytes is
// not held: the call fails with a *ResultTooLargeError (ErrResultTooLarge,
// KindOutcomeUnknown: the tool ran), whether the answer is an SSE stream,
// a JSON body of unknown length or one that announces its length (refused
// before a byte of it is read); an answer within the cap comes whole, and
// the pool goes on serving the server after a refusal.
func TestResultCap(t *testing.T) {
	const limit = 64 << 10
	for _, c := range []struct {
		name              string
		json, lengthKnown bool
		size              int64 // the *ResultTooLargeError's Size
	}{
		{"SSE", false, false, -1},
		{"JSON of unknown length", true, false, -1},
		{"JSON with Content-Length", true, true, -2}, // -2: the announced length, checked below
	} {
		t.Run(c.name, func(t *testing.T) {
			p := pool.New(&pool.Options{Transport: &http.Transport{}})
			t.Cleanup(func() { p.Close() })
			srv := &pool.Server{Name: "big", URL: bigServer(t, c.json, c.lengthKnown), MaxResultBytes: limit}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			call := func(n int) (*mcp.CallToolResult, error) {
				return p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "sized", Arguments: map[string]any{"n": n}})
			}
			res, err := call(limit / 2)
			if err != nil || len(res.Content) != 1 || len(res.Content[0].(*mcp.TextContent).Text) != limit/2 {
				t.Fatalf("a result within the cap: %v", err)
			}

			_, err = call(4 << 20)
			var over *pool.ResultTooLargeError
			var pe *pool.Error
			if !errors.Is(err, pool.ErrResultTooLarge) || !errors.As(err, &over) || !errors.As(err, &pe) {
				t.Fatalf("a result past the cap: err = %v, want a *ResultTooLargeError in a *pool.Error", err)
			}
			if pe.Kind != pool.KindOutcomeUnknown || pe.Retried || over.Limit != limit || over.Server != "big" {
				t.Errorf("kind %v retried %v, %+v", pe.Kind, pe.Retried, over)
			}
			if c.size == -2 {
				if over.Size <= 4<<20 {
					t.Errorf("Size %d, want the announced length, over 4 MiB", over.Size)
				}
			} else if over.Size != c.size {
				t.Errorf("Size %d, want %d", over.Size, c.size)
			}
			for _, want := range []string{"result too large", "cap of 65536", `server "big"`, "nothing of it kept"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}

			res, err = call(10)
			if err != nil || !bytes.Equal([]byte(res.Content[0].(*mcp.TextContent).Text), bytes.Repeat([]byte("x"), 10)) {
				t.Fatalf("the next call after a refusal: %v", err)
			}
		})
	}
}
