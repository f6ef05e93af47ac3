package askcmd

// Finding the studio a task goes through, and checking that it can do
// what the command line asks: that it has the --agent, and that this agent
// runs the model --model, $OPENAI_MODEL and $OPENAI_BASE_URL ask for. A
// studio ask starts runs those settings; a studio already running keeps
// the ones it was started with, so asking it for another model would be
// answered, silently, by the model it runs. The studio's agent listing
// says which model each agent runs (studioapi.AgentModel); ask compares
// the name and the endpoint, never the API key, which the listing does
// not carry and a difference in which nobody can see from outside.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

// healthTimeout bounds the check for a running studio: a studio on loopback
// answers at once, and a port nobody listens on refuses at once; the bound
// is for a listener that accepts and never answers.
const healthTimeout = 2 * time.Second

// agentsTimeout bounds GET /api/agents: the studio lists each running
// agent's tools for it, each within its own 5 s.
const agentsTimeout = 8 * time.Second

// studioConn is the studio a task goes through.
type studioConn struct {
	url   string
	close func() error // stops a studio ask started; a no-op for a running one
}

// reachStudio returns the studio at cfg.studioURL when it answers /healthz
// and has the agent and model asked for. Otherwise, unless the URL was
// given explicitly (then its absence is the error), it starts one
// in-process on an ephemeral loopback port.
func reachStudio(ctx context.Context, cfg *config, stderr io.Writer) (*studioConn, error) {
	err := healthy(ctx, cfg.studioURL)
	if err == nil {
		if cfg.modelTimeout != 0 {
			fmt.Fprintf(stderr, "switchboard ask: --model-timeout applies to a studio ask starts; the studio at %s keeps its own\n", cfg.studioURL)
		}
		agents, err := listAgents(ctx, cfg, cfg.studioURL)
		if err := checkAgent(cfg, cfg.studioURL, agents, err); err != nil {
			return nil, err
		}
		if err := checkModel(cfg, cfg.studioURL, agents, err); err != nil {
			return nil, err
		}
		return &studioConn{url: cfg.studioURL, close: func() error { return nil }}, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if cfg.explicit {
		return nil, fmt.Errorf("no studio at %s: %w", cfg.studioURL, err)
	}
	st, err := startInProcess(ctx, cfg, stderr)
	if err != nil {
		return nil, err
	}
	// Its agents run the model asked for: it was started with it.
	agents, err := listAgents(ctx, cfg, st.url)
	if err := checkAgent(cfg, st.url, agents, err); err != nil {
		return nil, errors.Join(err, st.close())
	}
	return st, nil
}

// errUnknownAgent: the studio has no agent of the --agent name.
var errUnknownAgent = errors.New("unknown agent")

// errModelMismatch: the studio's --agent runs another model than the one
// this ask asks for (--model, $OPENAI_MODEL, $OPENAI_BASE_URL), or the
// studio does not say which model it runs, when one is asked for. Like
// errUnknownAgent, a usage error: the command line asks for what that
// studio cannot do.
var errModelMismatch = errors.New("model mismatch")

// errNoListing: the studio's agent listing could not be read.
var errNoListing = errors.New("no agent listing")

// listAgents reads the studio's GET /api/agents.
func listAgents(ctx context.Context, cfg *config, base string) ([]studioapi.AgentInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, agentsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/agents", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoListing, err)
	}
	if cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: GET /api/agents: %w", errNoListing, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET /api/agents: %s", errNoListing, resp.Status)
	}
	var agents []studioapi.AgentInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&agents); err != nil {
		return nil, fmt.Errorf("%w: GET /api/agents: %w", errNoListing, err)
	}
	return agents, nil
}

// checkAgent fails, listing the studio's agents, when cfg.agent is not one
// of them. A studio that cannot say (an older one, a proxy in front, a
// listing that failed: listErr) is taken at its word: the call will tell.
func checkAgent(cfg *config, base string, agents []studioapi.AgentInfo, listErr error) error {
	if listErr != nil || len(agents) == 0 {
		return nil
	}
	var names []string
	for _, a := range agents {
		if a.Name == cfg.agent {
			return nil
		}
		names = append(names, a.Name)
	}
	return fmt.Errorf("%w %q: the studio at %s has %s; pick one with --agent", errUnknownAgent, cfg.agent, base, strings.Join(names, ", "))
}

// wantedModel is the model an ask asks for: what a studio it starts would
// run. Empty fields ask for nothing.
type wantedModel struct {
	name, nameFrom         string // --model, else $OPENAI_MODEL; and which
	endpoint, endpointFrom string // $OPENAI_BASE_URL ("builtin" for the builtin model); and which
}

func (w wantedModel) any() bool { return w.name != "" || w.endpoint != "" }

// wanted reads the model cfg asks for. A studio ask starts hands --model
// to its agents as $OPENAI_MODEL, over the environment's (inprocess.go),
// and its agents inherit $OPENAI_BASE_URL: the same precedence.
func (cfg *config) wanted() wantedModel {
	var w wantedModel
	switch {
	case cfg.model != "":
		w.name, w.nameFrom = cfg.model, "--model"
	case cfg.envModel != "":
		w.name, w.nameFrom = cfg.envModel, "$OPENAI_MODEL"
	}
	if cfg.envBaseURL != "" {
		w.endpoint, w.endpointFrom = cfg.envBaseURL, "$OPENAI_BASE_URL"
	}
	return w
}

// checkModel fails with errModelMismatch when the running studio's
// cfg.agent runs another model (name or endpoint) than cfg asks for, or
// when it does not say which it runs though one is asked for: ask never
// lets another model answer than the one asked for. Nothing asked for,
// nothing checked.
func checkModel(cfg *config, base string, agents []studioapi.AgentInfo, listErr error) error {
	w := cfg.wanted()
	if !w.any() {
		return nil
	}
	var runs *studioapi.AgentModel
	for _, a := range agents {
		if a.Name == cfg.agent {
			runs = a.Model
		}
	}
	asked := w.describe()
	if runs == nil {
		why := "its agent listing names no model for it (a studio older than this ask?)"
		if listErr != nil {
			why = "its agent listing could not be read: " + listErr.Error()
		}
		return fmt.Errorf("%w: this ask asks for %s, and the studio at %s does not say which model agent %s runs: %s; so ask cannot make sure that model answers. %s",
			errModelMismatch, asked, base, cfg.agent, why, cfg.howToRun(w))
	}
	nameOK := w.name == "" || w.name == runs.Name
	endpointOK := w.endpoint == "" || sameEndpoint(w.endpoint, runs.Endpoint)
	if nameOK && endpointOK {
		return nil
	}
	return fmt.Errorf("%w: agent %s at the studio at %s runs model %q %s, and this ask asks for %s; a running studio's agents keep the model they were started with. %s",
		errModelMismatch, cfg.agent, base, runs.Name, where(runs.Endpoint), asked, cfg.howToRun(w))
}

// describe says what w asks for, and where from.
func (w wantedModel) describe() string {
	var parts []string
	if w.name != "" {
		parts = append(parts, fmt.Sprintf("model %q (%s)", w.name, w.nameFrom))
	}
	switch {
	case w.endpoint == "":
	case w.name == "" && w.endpoint == studioapi.ModelEndpointBuiltin:
		parts = append(parts, "the builtin model ("+w.endpointFrom+")")
	default:
		parts = append(parts, fmt.Sprintf("%s (%s)", where(shownEndpoint(w.endpoint)), w.endpointFrom))
	}
	return strings.Join(parts, " ")
}

// where says where a model is served: the builtin model or a base URL.
func where(endpoint string) string {
	if endpoint == studioapi.ModelEndpointBuiltin {
		return "on the builtin model"
	}
	return "at " + endpoint
}

// howToRun says how to have the asked-for model answer: ask's own studio,
// a restarted one, or another one.
func (cfg *config) howToRun(w wantedModel) string {
	own := fmt.Sprintf("stop the studio at %s, and ask starts one of its own with these settings", cfg.studioURL)
	if cfg.explicit {
		own = "ask without --studio and $" + EnvStudioURL + " while no studio runs at " + cfg.defaultURL + ", and ask starts one of its own with these settings"
	}
	var env []string
	switch {
	case w.endpoint != "":
		env = append(env, "OPENAI_BASE_URL="+shownEndpoint(w.endpoint))
	case w.name != "" && w.name != runtime.BuiltinModel:
		// A model name alone is no endpoint: the runtime refuses to have
		// the builtin model answer under another name.
		env = append(env, "OPENAI_BASE_URL=<the endpoint that serves it>")
	}
	if w.name != "" {
		env = append(env, "OPENAI_MODEL="+w.name)
	}
	return fmt.Sprintf("To have it answer: %s; or restart that studio with them (%s switchboard up); or send the task to a studio that runs it (--studio URL)",
		own, strings.Join(env, " "))
}

// shownEndpoint is a base URL of ask's own environment as the studio's
// listing shows one (studio.ShownEndpoint), so that the two compare, and
// so that neither is shown with a credential.
func shownEndpoint(raw string) string {
	if raw == studioapi.ModelEndpointBuiltin {
		return raw
	}
	return studio.ShownEndpoint(raw, logging.SecretsFromEnv(os.Environ()))
}

// sameEndpoint reports whether ask's base URL (wanted) is where the
// studio's agent sends its requests (listed): equal once shown alike,
// but for a trailing slash and the case of the scheme and host, which
// reach the same server.
func sameEndpoint(wanted, listed string) bool {
	norm := func(s string) string {
		s = strings.TrimRight(s, "/")
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
			s = u.String()
		}
		return s
	}
	return norm(shownEndpoint(wanted)) == norm(listed)
}

// healthy checks GET <url>/healthz for a 200.
func healthy(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz: %s", resp.Status)
	}
	return nil
}
