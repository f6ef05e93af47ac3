package pool

import "context"

// CallInfo reports what the pool did for one request, including one that
// succeeded: a caller showing delegations live wants to say "recovered on a
// new session" when the first attempt found the session expired.
type CallInfo struct {
	// Retried: the first attempt provably did not run (its session had
	// expired), and the pool sent the request again on a new session.
	Retried bool
	// Attempts is the number of times the request was sent on sessions in
	// its last keyed send (1, or 2 when that session had expired); without
	// idempotency there is only one such send.
	Attempts int

	// For servers that advertise idempotency (docs/IDEMPOTENCY.md):
	// IdempotencyKey is the key the call carried (empty: none was sent);
	// KeyedAttempts how many times the pool sent it with that key; and
	// Replayed whether the answer came from the server's record of an
	// earlier attempt (the tool ran once, on that attempt) rather than
	// from running the tool now.
	IdempotencyKey string
	KeyedAttempts  int
	Replayed       bool
}

type callInfoKey struct{}

// WithCallInfo returns a context under which CallTool and ListTools fill in
// info. info is written before the call returns and must not be shared by
// concurrent calls.
func WithCallInfo(ctx context.Context, info *CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

func callInfoFrom(ctx context.Context) *CallInfo {
	info, _ := ctx.Value(callInfoKey{}).(*CallInfo)
	return info
}
