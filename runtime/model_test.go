package runtime

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

func TestResolveModel(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name                string
		model               agentdef.Model
		opts                Options
		wantBuiltin         bool
		wantName, wantURL   string
		wantErr, errMention string
	}{
		{name: "nothing configured: builtin", wantBuiltin: true, wantName: "builtin"},
		{name: "agent.json names builtin", model: agentdef.Model{Name: "builtin"}, wantBuiltin: true, wantName: "builtin"},
		{
			name:  "agent.json endpoint",
			model: agentdef.Model{BaseURL: "http://json.test/v1", Name: "json-model"},
			opts:  Options{Getenv: env()}, wantName: "json-model", wantURL: "http://json.test/v1",
		},
		{
			name:  "environment overrides agent.json",
			model: agentdef.Model{BaseURL: "http://json.test/v1", Name: "json-model"},
			opts:  Options{Getenv: env("OPENAI_BASE_URL", "http://env.test/v1", "OPENAI_MODEL", "env-model")}, wantName: "env-model", wantURL: "http://env.test/v1",
		},
		{
			name:  "options override the environment",
			model: agentdef.Model{Name: "json-model"},
			opts:  Options{Model: "flag-model", BaseURL: "http://opt.test/v1", Getenv: env("OPENAI_BASE_URL", "http://env.test/v1", "OPENAI_MODEL", "env-model")}, wantName: "flag-model", wantURL: "http://opt.test/v1",
		},
		{
			name: "base URL builtin forces the builtin model", opts: Options{BaseURL: "builtin", Getenv: env("OPENAI_BASE_URL", "http://env.test/v1")},
			wantBuiltin: true, wantName: "builtin",
		},
		{
			name:  "credentials in the URL are not shown",
			model: agentdef.Model{BaseURL: "http://user:secret@json.test/v1", Name: "m"},
			opts:  Options{Getenv: env()}, wantName: "m", wantURL: "http://json.test/v1",
		},
		{
			name:  "an endpoint with the builtin name",
			model: agentdef.Model{Name: "builtin"}, opts: Options{Getenv: env("OPENAI_BASE_URL", "http://env.test/v1")},
			wantErr: "no model configured", errMention: "OPENAI_MODEL",
		},
		// The builtin model is chosen, never fallen into: a model name with
		// no endpoint is an error naming where the name came from.
		{
			name: "a model named in the environment, no endpoint", opts: Options{Getenv: env("OPENAI_MODEL", "gpt-4o")},
			wantErr: "no model configured", errMention: `"gpt-4o" ($OPENAI_MODEL) but no endpoint serves it`,
		},
		{
			name: "a model named by --model, no endpoint", opts: Options{Model: "llama3.1", Getenv: env()},
			wantErr: "no model configured", errMention: `"llama3.1" (--model) but no endpoint`,
		},
		{
			name: "a model named in agent.json, no endpoint", model: agentdef.Model{Name: "gpt-4o-mini"},
			wantErr: "no model configured", errMention: `(model.name in agent.json) but no endpoint`,
		},
		{
			name: "--model builtin, no endpoint", opts: Options{Model: "builtin", Getenv: env("OPENAI_MODEL", "gpt-4o")},
			wantBuiltin: true, wantName: "builtin",
		},
		{
			name:  "a named key variable that is empty",
			model: agentdef.Model{BaseURL: "http://json.test/v1", Name: "m", APIKeyEnv: "MY_KEY"}, opts: Options{Getenv: env()},
			wantErr: "no model configured", errMention: "$MY_KEY",
		},
		{
			name:  "OPENAI_API_KEY stands in for the named variable",
			model: agentdef.Model{BaseURL: "http://json.test/v1", Name: "m", APIKeyEnv: "MY_KEY"}, opts: Options{Getenv: env("OPENAI_API_KEY", "k")},
			wantName: "m", wantURL: "http://json.test/v1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.Getenv == nil {
				tc.opts.Getenv = env()
			}
			m := resolveModel(&agentdef.Definition{Name: "oracle", Model: tc.model}, &tc.opts)
			if tc.wantErr != "" {
				if !errors.Is(m.err, ErrNoModel) || !strings.Contains(m.err.Error(), tc.errMention) {
					t.Errorf("err = %v, want ErrNoModel mentioning %s", m.err, tc.errMention)
				}
				return
			}
			if m.err != nil {
				t.Fatal(m.err)
			}
			if m.builtin != tc.wantBuiltin || m.name != tc.wantName || (!tc.wantBuiltin && m.baseURL != tc.wantURL) {
				t.Errorf("got builtin=%v name=%q url=%q, want builtin=%v name=%q url=%q", m.builtin, m.name, m.baseURL, tc.wantBuiltin, tc.wantName, tc.wantURL)
			}
			if strings.Contains(m.baseURL, "secret") {
				t.Errorf("base URL %q shows credentials", m.baseURL)
			}
		})
	}
}
