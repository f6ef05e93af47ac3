package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// Errors of a turn, for errors.Is.
var (
	// ErrNoModel is returned by Run when the agent's model settings are
	// incomplete (a base URL without a model name, or a named API key
	// variable that is empty).
	ErrNoModel = errors.New("no model configured")
	// ErrStepLimit ends a turn in which the model kept calling tools for
	// max_steps completions without answering.
	ErrStepLimit = errors.New("step limit reached")
	// ErrModel wraps a failure of the chat API itself.
	ErrModel = errors.New("model request failed")
	// ErrModelTimeout is the cause of a model request that got no answer
	// within Options.ModelTimeout; it comes wrapped in ErrModel.
	ErrModelTimeout = errors.New("model request timed out")
)

// DefaultModelTimeout bounds one model request (one chat completion) when
// neither Options.ModelTimeout nor $SWITCHBOARD_MODEL_TIMEOUT says
// otherwise: long enough for a large model to write a long answer, short
// enough that an endpoint which accepted the connection and never answers
// is reported while the person who asked is still there.
const DefaultModelTimeout = 2 * time.Minute

// EnvModelTimeout names the variable (a Go duration, "90s") that sets the
// model request deadline of every agent that does not set
// Options.ModelTimeout; `agent serve --model-timeout` and `ask
// --model-timeout` set it.
const EnvModelTimeout = "SWITCHBOARD_MODEL_TIMEOUT"

// DefaultMaxSteps bounds the model completions of one turn when agent.json
// sets no max_steps.
const DefaultMaxSteps = 10

// Options configure an Agent. The zero value of each field is its default.
type Options struct {
	// Model overrides the model name of agent.json and OPENAI_MODEL (the
	// --model flag).
	Model string
	// BaseURL overrides OPENAI_BASE_URL and agent.json's model.base_url.
	// "builtin" selects the builtin model.
	BaseURL string
	// APIKey overrides OPENAI_API_KEY and the variable agent.json names.
	APIKey string
	// HTTPClient carries chat API requests to a base URL (default
	// http.DefaultClient). The builtin model never uses it.
	HTTPClient *http.Client
	// Servers are offered to the model before the agent's mcp.json
	// siblings, through the same Caller: the agent server puts the agent's
	// own native tools here, so that an agent answers with everything it
	// has.
	Servers []*pool.Server
	// ModelTimeout bounds each model request (default
	// $SWITCHBOARD_MODEL_TIMEOUT, else DefaultModelTimeout). For a
	// streamed answer it is the wait for the first byte and then for each
	// next one, so that a long answer that keeps coming is never cut.
	ModelTimeout time.Duration
	// NoStream asks for every answer whole (stream: false), as does
	// $SWITCHBOARD_MODEL_STREAM=0. By default answers are streamed, so
	// that WithAnswerHandler sees the text as it is written; an endpoint
	// that refuses streams, or answers them with one JSON body, is asked
	// without from then on.
	NoStream bool
	// MaxRetries bounds how many times a failed model request of one step
	// is sent again (a 429, a 5xx, a reset, refused or timed-out
	// connection), with exponential backoff and full jitter, honouring
	// Retry-After. Zero means $SWITCHBOARD_MODEL_MAX_RETRIES, else
	// agent.json's model.max_retries, else DefaultMaxRetries; a negative
	// value means none. Above MaxMaxRetries, Run fails with ErrNoModel.
	MaxRetries int
	// MaxSteps overrides agent.json's max_steps.
	MaxSteps int
	// MaxToolResultBytes, MaxToolResultsBytes and MaxTools bound what a
	// turn puts into the model's context: one tool result's
	// text, all the tool results' text of one request, and the tools
	// offered. Zero means agent.json's "context", else
	// DefaultMaxToolResultBytes, DefaultMaxToolResultsBytes and
	// DefaultMaxTools; a negative value is taken as zero. A result bound
	// above the request's is held to it.
	MaxToolResultBytes  int
	MaxToolResultsBytes int
	MaxTools            int
	// Parallel bounds the tool calls of one response run at once (default
	// delegation.DefaultLimit).
	Parallel int
	// OnEvent is told of every delegation of every turn. A per-turn
	// handler can also travel in the context (WithEventHandler).
	OnEvent func(delegation.Event)
	// OnModelRequest is told of every model request of every turn (each
	// attempt, retries included) when it has ended: the agent server's
	// metrics count them. It is called on the turn's goroutine.
	OnModelRequest func(ModelRequest)
	// Getenv looks up OPENAI_BASE_URL, OPENAI_MODEL, OPENAI_API_KEY and the
	// agent's API key variable (default os.Getenv).
	Getenv func(string) string
	// Logger receives one line per model step and delegation (default:
	// discard). It never sees the API key.
	Logger *slog.Logger
}

// Agent runs model turns for one agent definition. It is safe for
// concurrent use: each Run is an independent turn.
type Agent struct {
	def     *agentdef.Definition
	caller  delegation.Caller
	model   model
	opts    Options
	log     *slog.Logger
	retries int // resolved MaxRetries
	budget  budget
	stream  streamMemo
	// secrets are the values of the agent's mcp.json that are, or may be,
	// credentials (mcpconfig.Config.Secrets): scrubbed from what the turn
	// builds from configuration (the unavailable list, which goes into
	// the system prompt, the Result and the notes).
	secrets []string
	// wait sleeps before a retry (sleep); tests replace it to see the
	// waits without spending them.
	wait func(context.Context, time.Duration) error
	// plain sends each step's request once, without the retry loop and
	// without the context budget, as turns did before them: only for the
	// benchmark that measures what they cost (bench_test.go).
	plain bool
}

// New returns an Agent for def whose delegations go through c (usually a
// *pool.Pool, which the caller owns and closes). A nil opts is the zero
// Options. Incomplete model settings are not an error here, so that an
// agent server can still offer its other tools: Run reports them
// (ErrNoModel).
func New(def *agentdef.Definition, c delegation.Caller, opts *Options) (*Agent, error) {
	if def == nil {
		return nil, errors.New("runtime.New: nil agent definition")
	}
	if c == nil {
		return nil, errors.New("runtime.New: nil caller")
	}
	a := &Agent{def: def, caller: c, wait: sleep}
	if opts != nil {
		a.opts = *opts
	}
	if a.opts.Getenv == nil {
		a.opts.Getenv = os.Getenv
	}
	a.log = a.opts.Logger
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.model = resolveModel(def, &a.opts)
	a.secrets = def.MCP.Secrets(os.Environ())
	if a.opts.ModelTimeout <= 0 {
		d, err := parseModelTimeout(a.opts.Getenv(EnvModelTimeout))
		if err != nil && a.model.err == nil {
			a.model.err = fmt.Errorf("%w: agent %q: %w", ErrNoModel, def.Name, err)
		}
		a.opts.ModelTimeout = d
	}
	n, err := maxRetries(def, &a.opts)
	if err != nil && a.model.err == nil {
		a.model.err = fmt.Errorf("%w: agent %q: %w", ErrNoModel, def.Name, err)
	}
	a.retries = n
	a.budget = resolveBudget(def, &a.opts)
	return a, nil
}

// Model returns the model name and where it is served ("builtin" or the
// base URL), for display. It never includes the API key.
func (a *Agent) Model() (name, endpoint string) {
	if a.model.builtin {
		return a.model.name, "builtin"
	}
	return a.model.name, a.model.baseURL
}

// parseModelTimeout reads a model request deadline as
// $SWITCHBOARD_MODEL_TIMEOUT and the --model-timeout flags write it: a
// positive Go duration; empty means DefaultModelTimeout.
func parseModelTimeout(s string) (time.Duration, error) {
	if s == "" {
		return DefaultModelTimeout, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return DefaultModelTimeout, fmt.Errorf("$%s=%q: want a positive duration such as 90s or 5m", EnvModelTimeout, s)
	}
	return d, nil
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
