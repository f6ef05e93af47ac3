package runtime

import (
	"context"

	"github.com/switchboard-run/switchboard/delegation"
)

type eventKey struct{}

// WithEventHandler returns a context whose turns report each delegation to
// fn as it starts and finishes, in addition to Options.OnEvent. The agent
// server's ask tool uses it to stream delegations to its caller as MCP
// progress notifications. Calls to fn are serialized within a turn.
func WithEventHandler(ctx context.Context, fn func(delegation.Event)) context.Context {
	return context.WithValue(ctx, eventKey{}, fn)
}

func eventHandler(ctx context.Context) func(delegation.Event) {
	fn, _ := ctx.Value(eventKey{}).(func(delegation.Event))
	return fn
}

type noteKey struct{}

// WithNoteHandler returns a context whose turns tell fn, in a sentence, of
// what the caller should know before the answer: each sibling or tool that
// could not be offered, and why. The agent server's ask tool sends these
// to its caller as progress notifications.
func WithNoteHandler(ctx context.Context, fn func(string)) context.Context {
	return context.WithValue(ctx, noteKey{}, fn)
}

func noteHandler(ctx context.Context) func(string) {
	fn, _ := ctx.Value(noteKey{}).(func(string))
	return fn
}
