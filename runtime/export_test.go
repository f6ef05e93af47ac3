package runtime

import (
	"context"
	"time"
)

// SetRetryWait replaces the sleep before a model request is sent again, so
// that a test sees each wait without spending it.
func SetRetryWait(a *Agent, fn func(context.Context, time.Duration) error) { a.wait = fn }
