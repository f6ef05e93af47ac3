package pool

import "context"

// CallInfo reports what the pool did for one request, including one that
// succeeded: a caller showing delegations live wants to say "recovered on a
// new session" when the first attempt found the session expired.
type CallInfo struct {
	// Retried: the first attempt provably did not run (its session had
	// expired), and the pool sent the request again on a new session.
	Retried bool
	// Attempts is the number of times the request was sent (1 or 2).
	Attempts int
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
