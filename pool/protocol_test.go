package pool

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fullServer is a real go-sdk server with resources, templates, prompts and
// completion, paging every list by 2, on a loopback port. restart swaps in a
// new go-sdk handler, which knows none of the old sessions (404), as a
// redeployed server does.
type fullServer struct {
	url     string
	handler atomic.Pointer[http.Handler]
	mcp     *mcp.Server // the current generation's; only the test goroutine uses it
}

func startFullServer(t *testing.T) *fullServer {
	fs := &fullServer{}
	fs.restart()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*fs.handler.Load()).ServeHTTP(w, r) })}
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Close()
		fs.closeSessions()
	})
	fs.url = "http://" + ln.Addr().String() + "/mcp"
	return fs
}

// closeSessions ends the current generation's sessions, as a process exit
// does.
func (fs *fullServer) closeSessions() {
	if fs.mcp == nil {
		return
	}
	for ss := range fs.mcp.Sessions() {
		ss.Close()
	}
}

func (fs *fullServer) restart() {
	fs.closeSessions()
	s := mcp.NewServer(&mcp.Implementation{Name: "full"}, &mcp.ServerOptions{
		PageSize: 2,
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var vals []string
			for _, v := range []string{"alpha", "beta", "alphabet"} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					vals = append(vals, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: vals, Total: len(vals)}}, nil
		},
	})
	for i := range 5 {
		uri := fmt.Sprintf("note://%d", i)
		s.AddResource(&mcp.Resource{Name: fmt.Sprint("note", i), URI: uri, MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "body of " + req.Params.URI}}}, nil
		})
	}
	for i := range 3 {
		s.AddResourceTemplate(&mcp.ResourceTemplate{Name: fmt.Sprint("tpl", i), URITemplate: fmt.Sprintf("tpl%d://{name}", i)}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "t"}}}, nil
		})
	}
	for i := range 3 {
		s.AddPrompt(&mcp.Prompt{Name: fmt.Sprint("prompt", i), Arguments: []*mcp.PromptArgument{{Name: "topic"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "write about " + req.Params.Arguments["topic"]}}}}, nil
		})
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	fs.handler.Store(&h)
	fs.mcp = s
}

// TestResourcesPromptsCompletion runs every client method of the protocol
// through the pool, and each one again after the server forgot the session:
// recovered on a new session, exactly one re-initialization per restart.
func TestResourcesPromptsCompletion(t *testing.T) {
	fs := startFullServer(t)
	p := newTestPool(t, nil)
	srv := &Server{Name: "full", URL: fs.url, ProtocolVersion: Protocol20251125}
	ctx := context.Background()
	ops := []struct {
		name string
		run  func(ctx context.Context) (any, error)
		want any
	}{
		{"resources/list", func(ctx context.Context) (any, error) {
			rs, err := p.ListResources(ctx, srv)
			var uris []string
			for _, r := range rs {
				uris = append(uris, r.URI)
			}
			return uris, err
		}, []string{"note://0", "note://1", "note://2", "note://3", "note://4"}},
		{"resources/templates/list", func(ctx context.Context) (any, error) {
			ts, err := p.ListResourceTemplates(ctx, srv)
			var names []string
			for _, tpl := range ts {
				names = append(names, tpl.Name)
			}
			return names, err
		}, []string{"tpl0", "tpl1", "tpl2"}},
		{"resources/read", func(ctx context.Context) (any, error) {
			r, err := p.ReadResource(ctx, srv, &mcp.ReadResourceParams{URI: "note://3"})
			if err != nil {
				return nil, err
			}
			return r.Contents[0].Text, nil
		}, "body of note://3"},
		{"prompts/list", func(ctx context.Context) (any, error) {
			ps, err := p.ListPrompts(ctx, srv)
			var names []string
			for _, pr := range ps {
				names = append(names, pr.Name)
			}
			return names, err
		}, []string{"prompt0", "prompt1", "prompt2"}},
		{"prompts/get", func(ctx context.Context) (any, error) {
			r, err := p.GetPrompt(ctx, srv, &mcp.GetPromptParams{Name: "prompt1", Arguments: map[string]string{"topic": "tides"}})
			if err != nil {
				return nil, err
			}
			return r.Messages[0].Content.(*mcp.TextContent).Text, nil
		}, "write about tides"},
		{"completion/complete", func(ctx context.Context) (any, error) {
			r, err := p.Complete(ctx, srv, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "prompt0"},
				Argument: mcp.CompleteParamsArgument{Name: "topic", Value: "alph"},
			})
			if err != nil {
				return nil, err
			}
			return r.Completion.Values, nil
		}, []string{"alpha", "alphabet"}},
	}
	for _, op := range ops {
		t.Run(strings.ReplaceAll(op.name, "/", "-"), func(t *testing.T) {
			got, err := op.run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(op.want, got) {
				t.Fatalf("got %#v, want %#v", got, op.want)
			}
			before := p.Stats()
			fs.restart()
			var info CallInfo
			got, err = op.run(WithCallInfo(ctx, &info))
			if err != nil {
				t.Fatalf("after the restart: %v", err)
			}
			if !reflect.DeepEqual(op.want, got) {
				t.Fatalf("after the restart: got %#v, want %#v", got, op.want)
			}
			st := p.Stats()
			if !info.Retried || st.Reinitializations-before.Reinitializations != 1 || st.Retries-before.Retries != 1 {
				t.Fatalf("want one retry on one new session: %+v, stats before %+v after %+v", info, before, st)
			}
		})
	}
	// A server error keeps its code and message through these paths too.
	_, err := p.ReadResource(ctx, srv, &mcp.ReadResourceParams{URI: "note://missing"})
	pe := asPoolError(t, err)
	if pe.Kind != KindRPC || pe.Method != "resources/read" || pe.Message == "" {
		t.Fatalf("want the server's error for a missing resource, got %+v", pe)
	}
}
