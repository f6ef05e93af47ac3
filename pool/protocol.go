package pool

import (
	"context"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The rest of the client protocol: resources, prompts and completion, with
// the same sessions, evidence, invalidation and retry rules as CallTool. The
// list methods return every page; each page is a request with a probe of its
// own, and a retry lists again from the first page on the new session (a
// cursor belongs to the session that issued it). Every list is bounded
// (list.go): a cursor loop or more than maxListPages pages fails it.

// ListResources lists all of srv's resources (every page).
func (p *Pool) ListResources(ctx context.Context, srv *Server) ([]*mcp.Resource, error) {
	var all []*mcp.Resource
	err := p.do(ctx, srv, "resources/list", "", func(a *attempt, e *entry) (err error) {
		all, err = listAll(srv, "resources/list", 0, func(cursor string) ([]*mcp.Resource, string, error) {
			res, err := e.cs.ListResources(a.request(), &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Resources, res.NextCursor, nil
		})
		return err
	})
	return all, err
}

// ListResourceTemplates lists all of srv's resource templates (every page).
func (p *Pool) ListResourceTemplates(ctx context.Context, srv *Server) ([]*mcp.ResourceTemplate, error) {
	var all []*mcp.ResourceTemplate
	err := p.do(ctx, srv, "resources/templates/list", "", func(a *attempt, e *entry) (err error) {
		all, err = listAll(srv, "resources/templates/list", 0, func(cursor string) ([]*mcp.ResourceTemplate, string, error) {
			res, err := e.cs.ListResourceTemplates(a.request(), &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.ResourceTemplates, res.NextCursor, nil
		})
		return err
	})
	return all, err
}

// ReadResource reads one resource of srv.
func (p *Pool) ReadResource(ctx context.Context, srv *Server, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	var res *mcp.ReadResourceResult
	err := p.do(ctx, srv, "resources/read", "", func(a *attempt, e *entry) error {
		sent := params
		if e.writesMeta() {
			sent = own(params, func(c *mcp.ReadResourceParams) { c.Meta = maps.Clone(c.Meta) })
		}
		r, err := e.cs.ReadResource(a.request(), sent)
		res = r
		return err
	})
	return res, err
}

// ListPrompts lists all of srv's prompts (every page).
func (p *Pool) ListPrompts(ctx context.Context, srv *Server) ([]*mcp.Prompt, error) {
	var all []*mcp.Prompt
	err := p.do(ctx, srv, "prompts/list", "", func(a *attempt, e *entry) (err error) {
		all, err = listAll(srv, "prompts/list", 0, func(cursor string) ([]*mcp.Prompt, string, error) {
			res, err := e.cs.ListPrompts(a.request(), &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Prompts, res.NextCursor, nil
		})
		return err
	})
	return all, err
}

// GetPrompt gets one prompt of srv.
func (p *Pool) GetPrompt(ctx context.Context, srv *Server, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	var res *mcp.GetPromptResult
	err := p.do(ctx, srv, "prompts/get", "", func(a *attempt, e *entry) error {
		sent := params
		if e.writesMeta() {
			sent = own(params, func(c *mcp.GetPromptParams) { c.Meta = maps.Clone(c.Meta) })
		}
		r, err := e.cs.GetPrompt(a.request(), sent)
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
		sent := params
		if e.writesMeta() {
			sent = own(params, func(c *mcp.CompleteParams) { c.Meta = maps.Clone(c.Meta) })
		}
		r, err := e.cs.Complete(a.request(), sent)
		res = r
		return err
	})
	return res, err
}
