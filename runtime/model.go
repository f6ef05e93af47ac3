package runtime

// The model settings are resolved once, when the Agent is made, in the
// order the package documentation gives ("The model"). The builtin model is
// reached through an in-process http.RoundTripper rather than a branch of
// its own, so that every model goes through the same go-openai code. The
// API key is only ever handed to go-openai, which sends it as a bearer
// token; it is never logged or put in an error.

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
	"github.com/switchboard-run/switchboard/runtime/builtin"
)

// BuiltinModel is the name, and the base URL, of the builtin model.
const BuiltinModel = builtin.ModelName

// model is an agent's resolved model settings.
type model struct {
	builtin bool
	baseURL string // redacted, for display; empty for the builtin model
	name    string
	client  *openai.Client
	err     error  // why the settings cannot be used; returned by Run
	apiKey  string // only to scrub it from the endpoint's errors
	// keySource names where the API key came from ("$OPENAI_API_KEY"),
	// for the error of a 401; empty when no key is sent.
	keySource string
}

func resolveModel(def *agentdef.Definition, opts *Options) model {
	env := opts.Getenv
	baseURL := cmp.Or(opts.BaseURL, env("OPENAI_BASE_URL"), def.Model.BaseURL)
	m := model{name: cmp.Or(opts.Model, env("OPENAI_MODEL"), def.Model.Name)}
	if baseURL == "" || baseURL == BuiltinModel {
		m.builtin = true
		if m.name == "" {
			m.name = BuiltinModel
		}
		if m.name != BuiltinModel {
			// The builtin model is chosen, never fallen into: a model named
			// with no endpoint to serve it would have the planner answer
			// under that name (Result.Model "gpt-4o" for a planner's text).
			m.err = fmt.Errorf("%w: agent %q names model %q (%s) but no endpoint serves it: set $OPENAI_BASE_URL, or model.base_url in agent.json, to the endpoint that serves %q, or name the builtin model %q", ErrNoModel, def.Name, m.name, modelSource(def, opts), m.name, BuiltinModel)
		}
		cfg := openai.DefaultConfig("")
		cfg.BaseURL = builtin.BaseURL
		cfg.HTTPClient = &http.Client{Transport: &modelTransport{base: builtin.Transport()}}
		m.client = openai.NewClientWithConfig(cfg)
		return m
	}

	m.baseURL = redact(baseURL)
	if m.name == "" || m.name == BuiltinModel {
		// agent.json names the builtin model (the bundled agents do), but
		// the requests would go to a real endpoint, which knows no such
		// model: say what to set rather than send them.
		m.err = fmt.Errorf("%w: agent %q sends its requests to %s but names no model there (model %q): set OPENAI_MODEL, --model, or model.name in agent.json", ErrNoModel, def.Name, m.baseURL, m.name)
		return m
	}
	key := opts.APIKey
	switch {
	case key != "":
		m.keySource = "Options.APIKey"
	case env("OPENAI_API_KEY") != "":
		key, m.keySource = env("OPENAI_API_KEY"), "$OPENAI_API_KEY"
	case def.Model.APIKeyEnv != "":
		key = env(def.Model.APIKeyEnv)
		m.keySource = "$" + def.Model.APIKeyEnv + " (model.api_key_env in agent.json)"
		if key == "" {
			m.err = fmt.Errorf("%w: agent %q needs an API key in $%s (model.api_key_env in agent.json) or $OPENAI_API_KEY, and both are empty", ErrNoModel, def.Name, def.Model.APIKeyEnv)
			return m
		}
	}
	m.apiKey = key
	cfg := openai.DefaultConfig(key) // an empty key sends no Authorization header (Ollama, vLLM)
	cfg.BaseURL = baseURL
	cfg.HTTPClient = wrapClient(opts.HTTPClient)
	m.client = openai.NewClientWithConfig(cfg)
	return m
}

// modelSource says where the model name came from, for an error about it.
func modelSource(def *agentdef.Definition, opts *Options) string {
	switch {
	case opts.Model != "":
		return "--model"
	case opts.Getenv("OPENAI_MODEL") != "":
		return "$OPENAI_MODEL"
	}
	return "model.name in agent.json"
}

// redact drops credentials a base URL may carry in its user info, so that
// the URL can be shown.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}
