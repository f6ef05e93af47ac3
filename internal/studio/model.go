package studio

// Which model each agent runs, for the agent listing: a client that asks
// for a model (`switchboard ask --model`, $OPENAI_BASE_URL) compares it
// with what runs here instead of being answered by another model.
//
// The agent's process resolves its model once, in runtime.New, from its
// agent.json and its environment; nothing the studio reads from it says
// which it resolved. So the studio makes the same resolution, with the
// same code (runtime.New, then Agent.Model), on the same inputs: the
// definition it hands the agent and the environment it starts it with.
// An agent.json edited after the studio started is read by an agent that
// restarts and not by this listing, as for the rest of what the studio
// shows of a definition (its description, its name).

import (
	"net/url"
	"os"
	"strings"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// agentModel is the model def's agent resolves in an environment of env
// (KEY=VALUE, the last of a key winning, as in the agent's process). c is
// never called: a turn would, and none runs here.
func agentModel(def *agentdef.Definition, c delegation.Caller, env []string) *studioapi.AgentModel {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	a, err := runtime.New(def, c, &runtime.Options{Getenv: func(k string) string { return vars[k] }})
	if err != nil {
		return nil // only for a nil definition or caller
	}
	name, endpoint := a.Model()
	if endpoint != runtime.BuiltinModel {
		endpoint = ShownEndpoint(endpoint, logging.SecretsFromEnv(env))
	} else {
		endpoint = studioapi.ModelEndpointBuiltin
	}
	return &studioapi.AgentModel{Name: name, Endpoint: endpoint}
}

// ShownEndpoint is a chat API base URL as the agent listing shows it:
// without user info, query and fragment (where a credential can travel),
// and with the values of secrets (the environment's credentials) redacted
// wherever else they appear. A client comparing its own base URL with a
// listed one passes it through ShownEndpoint with its own environment's
// secrets first.
func ShownEndpoint(raw string, secrets []string) string {
	if u, err := url.Parse(raw); err == nil {
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		raw = u.String()
	}
	return logging.Scrub(raw, secrets...)
}

// childEnv is the environment the studio starts every agent with, but for
// the per-agent variables (its key, the token), which name no model.
func childEnv(cfgEnv []string) []string {
	return append(os.Environ(), cfgEnv...)
}
