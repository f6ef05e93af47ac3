// Package logging builds the slog.Logger every command uses: tint for a
// person at a terminal, JSON for machines.
//
// Two things are added to every handler it builds:
//
//   - Attributes from the context (WithAttrs, and the trace and span ids of
//     the context's OpenTelemetry span), so that a line logged with
//     InfoContext under a delegation carries its run id without every call
//     site passing it; a log line links to its trace.
//   - Redaction: secrets never reach a log line, whatever a caller passes.
//     Attributes with a credential's key (authorization, token, api_key,
//     ...) are replaced, and so is any occurrence, in any string, of the
//     value of an environment variable that holds a credential
//     (SWITCHBOARD_TOKEN, OPENAI_API_KEY, *_API_KEY, *_TOKEN, *_SECRET,
//     *_PASSWORD). A secret can travel inside an error text or a URL; only
//     scrubbing the values catches those.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"go.opentelemetry.io/otel/trace"
)

// Redacted replaces a secret in a log line.
const Redacted = "[REDACTED]"

// New returns a logger writing to w in format "text" (tint; colour only when
// w is a terminal) or "json". Secrets are those of the process environment
// (see the package doc).
func New(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	return NewWithSecrets(w, format, level, SecretsFromEnv(os.Environ()))
}

// NewWithSecrets is New with the secret values to scrub given explicitly.
func NewWithSecrets(w io.Writer, format string, level slog.Level, secrets []string) (*slog.Logger, error) {
	rep := redactor(secrets)
	var h slog.Handler
	switch format {
	case "", "text":
		color := false
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				color = true
			}
		}
		h = tint.NewTextHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly, NoColor: !color, ReplaceAttr: rep})
	case "json":
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: rep})
	default:
		return nil, fmt.Errorf("unknown log format %q (want text or json)", format)
	}
	return slog.New(&contextHandler{Handler: h}), nil
}

// Formats are the values --log-format accepts.
const Formats = "text or json"

// minSecretLen keeps short values (a "1", a "true") that happen to sit in a
// variable named like a credential from blanking out every log line.
const minSecretLen = 6

// SecretsFromEnv returns the values of the variables in environ (KEY=VALUE)
// that hold credentials.
func SecretsFromEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < minSecretLen || !isSecretName(k) {
			continue
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isSecretName(name string) bool {
	n := strings.ToUpper(name)
	for _, suffix := range []string{"_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "APIKEY"} {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return n == "SWITCHBOARD_TOKEN" || n == "OPENAI_API_KEY" || n == "TOKEN"
}

// isSecretKey reports whether an attribute key names a credential.
func isSecretKey(key string) bool {
	k := strings.ToLower(key)
	switch k {
	case "authorization", "token", "bearer", "api_key", "apikey", "password", "secret":
		return true
	}
	return strings.HasSuffix(k, "_token") || strings.HasSuffix(k, "_api_key") || strings.HasSuffix(k, "_secret") || strings.HasSuffix(k, "_password")
}

// redactor returns the ReplaceAttr that blanks credentials.
func redactor(secrets []string) func([]string, slog.Attr) slog.Attr {
	scrub := func(s string) (string, bool) {
		changed := false
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, Redacted)
				changed = true
			}
		}
		return s, changed
	}
	return func(_ []string, a slog.Attr) slog.Attr {
		if a.Key != slog.MessageKey && isSecretKey(a.Key) {
			return slog.String(a.Key, Redacted)
		}
		if len(secrets) == 0 {
			return a
		}
		switch a.Value.Kind() {
		case slog.KindString:
			if s, ok := scrub(a.Value.String()); ok {
				return slog.String(a.Key, s)
			}
		case slog.KindAny:
			// Errors, URLs, structs: whatever the handler would print could
			// hold the secret; check their text.
			var text string
			switch v := a.Value.Any().(type) {
			case error:
				text = v.Error()
			case fmt.Stringer:
				text = v.String()
			default:
				text = fmt.Sprintf("%+v", v)
			}
			if s, ok := scrub(text); ok {
				return slog.String(a.Key, s)
			}
		}
		return a
	}
}

type attrsKey struct{}

// WithAttrs returns ctx carrying args (alternating keys and values, or
// slog.Attrs, as Logger.With takes them) to be added to every line logged
// with that context by a logger of this package.
func WithAttrs(ctx context.Context, args ...any) context.Context {
	if len(args) == 0 {
		return ctx
	}
	prev, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	r := slog.NewRecord(time.Time{}, 0, "", 0)
	r.Add(args...)
	attrs := slices.Clone(prev)
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	return context.WithValue(ctx, attrsKey{}, attrs)
}

// Attrs returns the attributes WithAttrs put in ctx.
func Attrs(ctx context.Context) []slog.Attr {
	a, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	return a
}

// contextHandler adds the context's attributes to each record. An attribute
// the record already has (a call site that passes "run" itself) is not
// repeated.
type contextHandler struct {
	slog.Handler
}

func (h *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.Handler.Handle(ctx, r)
	}
	extra := Attrs(ctx)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		extra = append(slices.Clip(extra), slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	if len(extra) == 0 {
		return h.Handler.Handle(ctx, r)
	}
	have := make(map[string]bool, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		have[a.Key] = true
		return true
	})
	r = r.Clone()
	for _, a := range extra {
		if !have[a.Key] {
			r.AddAttrs(a)
			have[a.Key] = true
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &contextHandler{Handler: h.Handler.WithAttrs(attrs)}
}

func (h *contextHandler) WithGroup(name string) slog.Handler {
	return &contextHandler{Handler: h.Handler.WithGroup(name)}
}
