package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestRedaction(t *testing.T) {
	const secret = "sk-0123456789abcdef"
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := NewWithSecrets(&buf, format, slog.LevelDebug, []string{secret})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse("http://user:" + secret + "@example.invalid/v1")
			log.Info("calling with "+secret,
				"authorization", "Bearer whatever",
				"api_key", "anything",
				"err", fmt.Errorf("model: %w", errors.New("Incorrect API key provided: "+secret)),
				"url", u,
				"note", "key="+secret,
				slog.Group("g", "token", "x"),
				"tokens", 12, // a count, not a credential
			)
			out := buf.String()
			if strings.Contains(out, secret) || strings.Contains(out, "whatever") || strings.Contains(out, "anything") {
				t.Fatalf("a secret survived:\n%s", out)
			}
			if n := strings.Count(out, Redacted); n < 7 {
				t.Errorf("%d redactions, want 7:\n%s", n, out)
			}
			if !strings.Contains(out, "12") {
				t.Errorf("an innocent attribute was touched:\n%s", out)
			}
		})
	}
}

func TestSecretsFromEnv(t *testing.T) {
	got := SecretsFromEnv([]string{
		"SWITCHBOARD_TOKEN=tok-123456", "OPENAI_API_KEY=sk-abcdef", "GITHUB_TOKEN=ghp_xxxxxxxx",
		"MY_SECRET=s3cr3t-value", "DB_PASSWORD=hunter22", "SHORT_TOKEN=1", "HOME=/root", "PATH=/usr/bin",
	})
	want := []string{"ghp_xxxxxxxx", "hunter22", "s3cr3t-value", "sk-abcdef", "tok-123456"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestContextAttrs(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewWithSecrets(&buf, "json", slog.LevelInfo, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithAttrs(context.Background(), "run", "R1")
	ctx = WithAttrs(ctx, "agent", "oracle")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	log.InfoContext(ctx, "delegating")
	log.InfoContext(ctx, "answered", "run", "explicit") // the call site wins
	log.With("component", "pool").InfoContext(ctx, "dial")
	log.Info("no context")

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if lines[0]["run"] != "R1" || lines[0]["agent"] != "oracle" || lines[0]["trace_id"] != tid.String() || lines[0]["span_id"] != sid.String() {
		t.Errorf("line with context: %v", lines[0])
	}
	if lines[1]["run"] != "explicit" || strings.Count(buf.String(), `"run"`) != 3 {
		t.Errorf("a call site's own attribute is repeated or replaced:\n%s", buf.String())
	}
	if lines[2]["run"] != "R1" || lines[2]["component"] != "pool" {
		t.Errorf("a derived logger loses the context: %v", lines[2])
	}
	if _, ok := lines[3]["run"]; ok {
		t.Errorf("a line without context got one: %v", lines[3])
	}
}

func TestScrubberJSON(t *testing.T) {
	sc := NewScrubber([]string{"s3cr3t-value", "abc"})
	got := string(sc.JSON([]byte(`{"api_key":"x","note":"token is s3cr3t-value","n":12345678901234567890,"list":[{"Authorization":"Bearer q"}],"short":"abc"}`)))
	want := `{"api_key":"[REDACTED]","list":[{"Authorization":"[REDACTED]"}],"n":12345678901234567890,"note":"token is [REDACTED]","short":"abc"}`
	if got != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	if got := sc.String("not json s3cr3t-value"); got != "not json [REDACTED]" {
		t.Errorf("String: %q", got)
	}
	if got := string(sc.JSON([]byte("{broken s3cr3t-value"))); got != "{broken [REDACTED]" {
		t.Errorf("JSON of non-JSON: %q", got)
	}
}

// TestScrubberJSONClean: JSON with nothing to redact is compacted as it
// was written (its members' order kept); a credential's key written with an
// escape, or in letters that lower-case to one, and a secret value are
// still redacted.
func TestScrubberJSONClean(t *testing.T) {
	sc := NewScrubber([]string{"s3cr3t-value"})
	for _, tc := range []struct{ in, want string }{
		{`{"z": 1, "a": ["x", {"n": 1.50}], "t": "<b>"}`, `{"z":1,"a":["x",{"n":1.50}],"t":"<b>"}`},
		{`{"\u0074oken":"x","b":1}`, `{"b":1,"token":"[REDACTED]"}`},
		{"{\"to\u212Aen\":\"x\"}", "{\"to\u212Aen\":\"[REDACTED]\"}"},
		{`{"My_Password":"x"}`, `{"My_Password":"[REDACTED]"}`},
		{`{"a":"s3cr3t-value"}`, `{"a":"[REDACTED]"}`},
		{`{"a":"s3cr3t\u002dvalue"}`, `{"a":"[REDACTED]"}`},
		{`{"a": "line\nand \"quoted\""}`, `{"a":"line\nand \"quoted\""}`},
	} {
		if got := string(sc.JSON([]byte(tc.in))); got != tc.want {
			t.Errorf("JSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	slash := NewScrubber([]string{"abc/def"})
	if got, want := string(slash.JSON([]byte(`{"a":"abc\/def"}`))), `{"a":"[REDACTED]"}`; got != want {
		t.Errorf("a secret with '/' written as \\/: %s, want %s", got, want)
	}
}
