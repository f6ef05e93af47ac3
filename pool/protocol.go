package pool

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The rest of the client protocol: resources, prompts and completion, with
// the same sessions, evidence, invalidation and retry rules as CallTool. The
// list methods return every page; each page is a request with a probe of its
// own, and a retry lists again from the first page on the new session (a
// cursor belongs to the session that issued it).

// ListResources lists all of srv's resources (every page).
func (p *Pool) ListResources(ctx context.Context, srv *Server) ([]*mcp.Resource, error) {
	var all []*mcp.Resource
	err := p.do(ctx, srv, "resources/list", "", func(a *attempt, e *entry) error {
		all = nil
		params := &mcp.ListResourcesParams{}
		for {
			res, err := e.cs.ListResources(a.request(), params)
			if err != nil {
				return err
			}
			all = append(all, res.Resources...)
			if res.NextCursor == "" {
				return nil
			}
			params = &mcp.ListResourcesParams{Cursor: res.NextCursor}
		}
	})
	return all, err
}

// ListResourceTemplates lists all of srv's resource templates (every page).
func (p *Pool) ListResourceTemplates(ctx context.Context, srv *Server) ([]*mcp.ResourceTemplate, error) {
	var all []*mcp.ResourceTemplate
	err := p.do(ctx, srv, "resources/templates/list", "", func(a *attempt, e *entry) error {
		all = nil
		params := &mcp.ListResourceTemplatesParams{}
		for {
			res, err := e.cs.ListResourceTemplates(a.request(), params)
			if err != nil {
				return err
			}
			all = append(all, res.ResourceTemplates...)
			if res.NextCursor == "" {
				return nil
			}
			params = &mcp.ListResourceTemplatesParams{Cursor: res.NextCursor}
		}
	})
	return all, err
}

// ReadResource reads one resource of srv.
func (p *Pool) ReadResource(ctx context.Context, srv *Server, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	var res *mcp.ReadResourceResult
	err := p.do(ctx, srv, "resources/read", "", func(a *attempt, e *entry) error {
		r, err := e.cs.ReadResource(a.request(), params)
		res = r
		return err
	})
	return res, err
}

// ListPrompts lists all of srv's prompts (every page).
func (p *Pool) ListPrompts(ctx context.Context, srv *Server) ([]*mcp.Prompt, error) {
	var all []*mcp.Prompt
	err := p.do(ctx, srv, "prompts/list", "", func(a *attempt, e *entry) error {
		all = nil
		params := &mcp.ListPromptsParams{}
		for {
			res, err := e.cs.ListPrompts(a.request(), params)
			if err != nil {
				return err
			}
			all = append(all, res.Prompts...)
			if res.NextCursor == "" {
				return nil
			}
			params = &mcp.ListPromptsParams{Cursor: res.NextCursor}
		}
	})
	return all, err
}

// GetPrompt gets one prompt of srv.
func (p *Pool) GetPrompt(ctx context.Context, srv *Server, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	var res *mcp.GetPromptResult
	err := p.do(ctx, srv, "prompts/get", "", func(a *attempt, e *entry) error {
		r, err := e.cs.GetPrompt(a.request(), params)
		res = r
		return err
	})
	return res, err
}

// Complete asks srv to complete a prompt argument or resource template
// variable.
func (p *Pool) Complete(ctx context.Context, srv *Server, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	var res *mcp.CompleteResult
	err := p.do(ctx, srv, "completion/complete", "", func(a *attempt, e *entry) error {
		r, err := e.cs.Complete(a.request(), params)
		res = r
		return err
	})
	return res, err
}
