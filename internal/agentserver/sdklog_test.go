package agentserver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestSDKLoggerDemotesInfo: go-sdk's per-session Info lines are not written
// at the agent's default level, and are at Debug; its warnings stay.
func TestSDKLoggerDemotesInfo(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  []string
		not   []string
	}{
		{slog.LevelInfo, []string{"level=WARN msg=warned agent=a"}, []string{"connected"}},
		{slog.LevelDebug, []string{"level=DEBUG msg=connected agent=a", "level=WARN msg=warned agent=a"}, []string{"level=INFO"}},
	} {
		var buf bytes.Buffer
		base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level, ReplaceAttr: dropTime}))
		l := sdkLogger(base).With("agent", "a")
		l.Info("connected")
		l.Warn("warned")
		out := buf.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("at %v: %q lacks %q", tc.level, out, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out, n) {
				t.Errorf("at %v: %q has %q", tc.level, out, n)
			}
		}
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
