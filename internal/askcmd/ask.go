package askcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
)

// output is the --json object.
type output struct {
	Answer      string             `json:"answer"`
	Agent       string             `json:"agent"`
	Delegations []delegation.Event `json:"delegations"`
	DurationMS  int64              `json:"duration_ms"`
	Error       string             `json:"error,omitempty"`
}

// askResult is the part of the ask tool's structured result this command
// reads, when the agent sends one: its delegations are complete, where the
// progress notifications may have been overtaken by the response.
type askResult struct {
	Answer      string             `json:"answer"`
	Delegations []delegation.Event `json:"delegations"`
}

func run(ctx context.Context, cfg *config, stdout, stderr io.Writer) int {
	start := time.Now()
	ctx, span := startAskSpan(ctx, cfg)
	defer span.End()
	out := output{Agent: cfg.agent, Delegations: []delegation.Event{}}
	fail := func(code int, err error) int {
		failSpan(span, err)
		out.DurationMS = time.Since(start).Milliseconds()
		if cfg.json {
			out.Error = err.Error()
			writeJSON(stdout, out)
		}
		fmt.Fprintf(stderr, "switchboard ask: %v\n", err)
		return code
	}

	st, err := reachStudio(ctx, cfg, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return fail(exitCancelled, fmt.Errorf("cancelled: %w", ctx.Err()))
		}
		return fail(exitFailed, err)
	}
	defer st.close()

	p := pool.New(&pool.Options{
		ClientInfo: &mcp.Implementation{Name: "switchboard-ask", Version: "0.1.0"},
	})
	// Close before the studio closes: its DELETE must reach the agent, and
	// after an interrupt the pool first delivers go-sdk's
	// notifications/cancelled, so the agent stops delegating for a user who
	// has gone.
	defer p.Close()

	pr := newPrinter(stderr)
	srv := &pool.Server{Name: cfg.agent, URL: st.url + "/api/agents/" + url.PathEscape(cfg.agent) + "/mcp"}
	if cfg.token != "" {
		// A studio with a token wants it on every /api/ request.
		srv.Headers = map[string]string{"Authorization": "Bearer " + cfg.token}
	}
	res, err := p.CallTool(pool.WithProgress(ctx, pr.progress), srv, &mcp.CallToolParams{
		Name:      "ask",
		Arguments: map[string]any{"task": cfg.task},
	})
	var final askResult
	if err == nil {
		final = structured(res)
	}
	out.Delegations = append(out.Delegations, pr.stop(final.Delegations)...)
	switch {
	case ctx.Err() != nil:
		return fail(exitCancelled, fmt.Errorf("cancelled; the agent was told to stop: %w", ctx.Err()))
	case err != nil:
		return fail(exitFailed, fmt.Errorf("asking agent %s at %s: %w", cfg.agent, st.url, err))
	case res.IsError:
		return fail(exitFailed, fmt.Errorf("agent %s: %s", cfg.agent, delegation.ResultText(res)))
	}

	out.Answer = delegation.ResultText(res)
	if final.Answer != "" {
		out.Answer = final.Answer
	}
	out.DurationMS = time.Since(start).Milliseconds()
	if cfg.json {
		writeJSON(stdout, out)
	} else {
		fmt.Fprintln(stdout, strings.TrimRight(out.Answer, "\n"))
	}
	return exitOK
}

// structured reads what it can of the ask tool's structured result: the
// zero askResult when there is none.
func structured(res *mcp.CallToolResult) askResult {
	var r askResult
	if res.StructuredContent == nil {
		return r
	}
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(b, &r) // a field of the wrong type is left zero
	}
	return r
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only an unmarshalable value gets here; all of output marshals.
		panic(errors.Join(errors.New("askcmd: encoding the output"), err))
	}
}
