package runtime

import (
	"context"
	"net/http"
	"time"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/runtime/builtin"
)

// SetRetryWait replaces the sleep before a model request is sent again, so
// that a test sees each wait without spending it.
func SetRetryWait(a *Agent, fn func(context.Context, time.Duration) error) { a.wait = fn }

// PlainModelPath makes a builtin-model agent send its requests as turns
// did before retries and normalisation: builtin's transport directly, one
// attempt per step. For BenchmarkTurn's baseline.
func PlainModelPath(a *Agent) {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = builtin.BaseURL
	cfg.HTTPClient = &http.Client{Transport: builtin.Transport()}
	a.model.client = openai.NewClientWithConfig(cfg)
	a.plain = true
}
