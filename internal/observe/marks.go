package observe

import (
	"context"
	"net/http"
	"time"
)

// What the route and the redialing transport tell the observation of a
// request, for the run page's marks: the observation travels in the
// request's context. Both run on the request's own goroutine (the reverse
// proxy calls its transport synchronously), as does the recording.

type observationKey struct{}

func withObservation(r *http.Request, o *observation) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), observationKey{}, o))
}

// heldThreshold: a wait shorter than this is the route's own overhead, not
// a hold for a restarting agent.
const heldThreshold = 5 * time.Millisecond

func NoteHeld(ctx context.Context, d time.Duration) {
	if o, ok := ctx.Value(observationKey{}).(*observation); ok && d >= heldThreshold {
		o.held = d
	}
}

func NoteReplayed(ctx context.Context) {
	if o, ok := ctx.Value(observationKey{}).(*observation); ok {
		o.replayed = true
	}
}
