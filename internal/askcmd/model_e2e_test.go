package askcmd

// End-to-end tests of the model an ask asks for, against a studio already
// running: its agents keep the model they were started with, so an ask
// for another one (--model, $OPENAI_MODEL, $OPENAI_BASE_URL) exits 2,
// saying what runs there and how to run the asked-for model, before
// anything is asked; an ask for the model that runs there goes ahead
// without a word about it. Real processes throughout; the model endpoints
// are scripted, OpenAI-shaped test servers that count what reaches them.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

func TestE2EModelMismatchWithARunningStudio(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	// The model the studio runs, and another one nobody should reach.
	model := newScriptedModel(t, map[string][]turnStep{"alpha": {{
		check: func(t *testing.T, req *openai.ChatCompletionRequest) {
			if req.Model != "scripted" {
				t.Errorf("alpha's turn asked for model %q, want scripted", req.Model)
			}
		},
		reply: openai.ChatCompletionMessage{Content: "the scripted model answers"},
	}}})
	other := newScriptedModel(t, nil)
	dir := t.TempDir()
	// abacus's tools as its own, so that a turn without delegations is a
	// plain answer (an agent with no tools at all is "unavailable").
	writeFile(t, filepath.Join(dir, "agents", "alpha", agentdef.DefinitionFile),
		`{"name": "alpha", "description": "test agent alpha", "instructions": "You are alpha, a test agent.", "tools": ["abacus"]}`)
	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted")
	runs := `agent alpha at the studio at ` + st.URL() + ` runs model "scripted" at ` + model.URL

	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string // in stderr and --json "error"
	}{
		{"--model", nil, []string{"--model", "gpt-other"}, []string{
			runs, `this ask asks for model "gpt-other" (--model)`,
			"(OPENAI_BASE_URL=<the endpoint that serves it> OPENAI_MODEL=gpt-other switchboard up)", "ask without --studio", "--studio URL",
		}},
		{"$OPENAI_MODEL", []string{"OPENAI_MODEL=gpt-env"}, nil, []string{runs, `model "gpt-env" ($OPENAI_MODEL)`}},
		{"$OPENAI_BASE_URL", []string{"OPENAI_BASE_URL=" + other.URL, "OPENAI_MODEL=scripted"}, nil, []string{
			runs, `model "scripted" ($OPENAI_MODEL) at ` + other.URL + ` ($OPENAI_BASE_URL)`,
			"(OPENAI_BASE_URL=" + other.URL + " OPENAI_MODEL=scripted switchboard up)",
		}},
		{"$OPENAI_BASE_URL builtin", []string{"OPENAI_BASE_URL=builtin"}, nil, []string{runs, "this ask asks for the builtin model ($OPENAI_BASE_URL)", "(OPENAI_BASE_URL=builtin switchboard up)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ask := startAskEnv(t, ctx, dir, cleanEnv(c.env...), append([]string{"--studio", st.URL(), "--agent", "alpha", "--json"}, append(c.args, "what runs there?")...)...)
			if code := ask.wait(t); code != exitUsage {
				t.Fatalf("ask exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUsage, ask.stdout, ask.stderr)
			}
			out := decodeAsk(t, ask)
			if out.ExitCode != exitUsage || out.Answer != "" {
				t.Errorf("--json %+v", out)
			}
			for _, w := range c.want {
				if !strings.Contains(ask.stderr.String(), w) || !strings.Contains(out.Error, w) {
					t.Errorf("stderr %q (--json error %q) lacks %q", ask.stderr, out.Error, w)
				}
			}
		})
	}
	// Nothing was asked: neither model served a request.
	if n, m := model.Served("alpha"), other.Served("alpha"); n != 0 || m != 0 {
		t.Fatalf("a refused ask reached a model: %d requests to the studio's, %d to the other", n, m)
	}

	// Found at the default address (not named): stopping that studio lets
	// ask start its own.
	ask := startAskEnv(t, ctx, dir, cleanEnv(EnvDefaultStudioURL+"="+st.URL()), "--agent", "alpha", "--model", "gpt-other", "what runs there?")
	if code := ask.wait(t); code != exitUsage || !strings.Contains(ask.stderr.String(), "stop the studio at "+st.URL()+", and ask starts one of its own") {
		t.Errorf("at the default address: exit %d, stderr %q", code, ask.stderr)
	}

	// The settings that run there, spelled with a trailing slash and asked
	// by --model and the environment: the task goes ahead, silently.
	ask = startAskEnv(t, ctx, dir, cleanEnv("OPENAI_BASE_URL="+model.URL+"/", "OPENAI_MODEL=scripted"), "--studio", st.URL(), "--agent", "alpha", "--model", "scripted", "what runs there?")
	if code := ask.wait(t); code != exitOK {
		t.Fatalf("matching ask exited %d\nstderr:\n%s", code, ask.stderr)
	}
	if got := strings.TrimSpace(ask.stdout.String()); got != "the scripted model answers" {
		t.Errorf("matching ask answered %q", got)
	}
	if strings.Contains(ask.stderr.String(), "switchboard ask:") {
		t.Errorf("matching ask said something about it:\n%s", ask.stderr)
	}
	if n := model.Served("alpha"); n != 1 {
		t.Errorf("the studio's model served %d requests, want 1", n)
	}
}
