package askcmd

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestModelAskedOfAStudioThatDoesNotSay: a studio whose agent listing
// names no model (here: one with no /api/agents at all, as a proxy in
// front of a studio may be) cannot show that it runs the model asked for,
// so an ask with --model exits 2 before asking, saying why; without one
// it is asked as before.
func TestModelAskedOfAStudioThatDoesNotSay(t *testing.T) {
	t.Setenv("OPENAI_MODEL", "")
	t.Setenv("OPENAI_BASE_URL", "")
	var asked atomic.Int32
	url := fakeStudio(t, "oracle", func(context.Context, *mcp.CallToolRequest, askInput) (*mcp.CallToolResult, any, error) {
		asked.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answered"}}}, nil, nil
	})
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"--studio", url, "--model", "gpt-x", "hello"}, nil, &stdout, &stderr)
	for _, want := range []string{`this ask asks for model "gpt-x" (--model)`, "does not say which model agent oracle runs", "GET /api/agents: 404", "(OPENAI_BASE_URL=<the endpoint that serves it> OPENAI_MODEL=gpt-x switchboard up)"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
	if code != exitUsage || asked.Load() != 0 || stdout.Len() != 0 {
		t.Fatalf("exit %d, asked %d times, stdout %q; want %d, never asked", code, asked.Load(), stdout.String(), exitUsage)
	}

	stdout.Reset()
	stderr.Reset()
	if code := Main(t.Context(), []string{"--studio", url, "hello"}, nil, &stdout, &stderr); code != exitOK || asked.Load() != 1 || strings.TrimSpace(stdout.String()) != "answered" {
		t.Errorf("without --model: exit %d, asked %d times, stdout %q, stderr %q", code, asked.Load(), stdout.String(), stderr.String())
	}
}

// TestSameEndpoint: ask's base URL and the listed one are the same
// endpoint when they differ only by a trailing slash, the case of scheme
// and host, or what the listing leaves out (user info, query); the builtin
// model is only itself.
func TestSameEndpoint(t *testing.T) {
	for _, tc := range []struct {
		wanted, listed string
		same           bool
	}{
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1", true},
		{"http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1", true},
		{"HTTP://LocalHost:8080/v1", "http://localhost:8080/v1", true},
		{"https://u:p4ssw0rd@api.example.com/v1?api-version=1", "https://api.example.com/v1", true},
		{"builtin", "builtin", true},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8081/v1", false},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v2", false},
		{"http://127.0.0.1:8080/V1", "http://127.0.0.1:8080/v1", false}, // paths are case-sensitive
		{"builtin", "http://127.0.0.1:8080/v1", false},
	} {
		if got := sameEndpoint(tc.wanted, tc.listed); got != tc.same {
			t.Errorf("sameEndpoint(%q, %q) = %v, want %v", tc.wanted, tc.listed, got, tc.same)
		}
	}
}
