package agentserver

import (
	"context"
	"log/slog"
)

// go-sdk's mcp.Server logs every session's start and end at Info ("server
// connecting", "server session connected", "server session disconnected").
// In the sessionless era (2026-07-28) every call is a session of its own,
// so that was three lines per call: the agent formatted them, and the
// studio, which reads every agent's output, split, stored and copied them
// (6% of the studio's CPU per small call in BenchmarkHop's profile). They
// say nothing the studio's own records do not, so they are Debug here;
// the SDK's warnings and errors keep their level.

// sdkLogger is logger for go-sdk, with its Info records demoted to Debug.
func sdkLogger(logger *slog.Logger) *slog.Logger {
	return slog.New(demoteInfo{logger.Handler()})
}

type demoteInfo struct{ h slog.Handler }

func demoted(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (d demoteInfo) Enabled(ctx context.Context, l slog.Level) bool {
	return d.h.Enabled(ctx, demoted(l))
}

func (d demoteInfo) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demoted(r.Level)
	return d.h.Handle(ctx, r)
}

func (d demoteInfo) WithAttrs(as []slog.Attr) slog.Handler { return demoteInfo{d.h.WithAttrs(as)} }
func (d demoteInfo) WithGroup(name string) slog.Handler    { return demoteInfo{d.h.WithGroup(name)} }
