package authstate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// Secrets every record below holds; none may reach any output.
var secrets = []string{"AT-SECRET", "RT-SECRET", "CS-SECRET"}

func writeAgent(t *testing.T, dir, name, mcpJSON string) {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(d, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d, "agent.json"), []byte(`{"name":"`+name+`","description":"test agent"}`), 0o644)
	if mcpJSON != "" {
		os.WriteFile(filepath.Join(d, "tools", "mcp.json"), []byte(mcpJSON), 0o644)
	}
}

func TestForAgents(t *testing.T) {
	root := t.TempDir()
	agents := filepath.Join(root, "agents")
	// linear: signed in, used by two agents, configured by one only.
	// notes: expired with a refresh token. wiki: expired without one.
	// sibling: sends its own Authorization header, so it is not ours.
	// local: stdio. ci: client credentials, no token yet.
	writeAgent(t, agents, "alpha", `{"mcpServers":{
		"linear":{"url":"https://mcp.linear.example/mcp","oauth":{"clientId":"sb","scopes":"read write"}},
		"notes":{"url":"https://notes.example/mcp"},
		"sibling":{"url":"http://127.0.0.1:1/api/agents/b/mcp","headers":{"Authorization":"Bearer x"}},
		"local":{"command":"true"}}}`)
	writeAgent(t, agents, "beta", `{"servers":{
		"linear":{"url":"https://mcp.linear.example/mcp"},
		"wiki":{"url":"https://wiki.example/mcp"},
		"ci":{"url":"https://ci.example/mcp","oauth":{"grant":"client_credentials","clientId":"c","clientSecret":"CS-SECRET"}}}}`)
	writeAgent(t, agents, "gamma", "")
	defs, err := agentdef.LoadAll(agents)
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 3 {
		t.Fatalf("loaded %d agents", len(defs))
	}

	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	store := &tokenstore.Store{Dir: filepath.Join(root, "tokens")}
	for _, r := range []*tokenstore.Record{
		{URL: "https://mcp.linear.example/mcp", Issuer: "https://auth.linear.example", Scopes: []string{"read", "write"},
			AccessToken: "AT-SECRET", RefreshToken: "RT-SECRET", ClientSecret: "CS-SECRET", Expiry: now.Add(time.Hour), Obtained: now.Add(-time.Minute)},
		{URL: "https://notes.example/mcp", Issuer: "https://notes.example", AccessToken: "AT-SECRET", RefreshToken: "RT-SECRET", Expiry: now.Add(-time.Second)},
		{URL: "https://wiki.example/mcp", AccessToken: "AT-SECRET", Expiry: now},
		// Another identity's token for wiki: never shown as the agents'.
		{URL: "https://ci.example/mcp", Identity: "someone-else", AccessToken: "AT-SECRET"},
	} {
		if err := store.Save(r); err != nil {
			t.Fatal(err)
		}
	}

	got := ForAgents(defs, store, now)
	at := func(t time.Time) *time.Time { return &t }
	want := Report{Servers: []Server{
		{Server: "ci", URL: "https://ci.example/mcp", Agents: []string{"beta"}, Grant: "client_credentials", Configured: true, State: SignedOut},
		{Server: "linear", URL: "https://mcp.linear.example/mcp", Agents: []string{"alpha", "beta"}, Grant: "authorization_code", Configured: true, State: SignedIn,
			Issuer: "https://auth.linear.example", Scopes: []string{"read", "write"}, Expires: at(now.Add(time.Hour)), Obtained: at(now.Add(-time.Minute)), Refreshable: true},
		{Server: "notes", URL: "https://notes.example/mcp", Agents: []string{"alpha"}, Grant: "authorization_code", State: Expired,
			Issuer: "https://notes.example", Expires: at(now.Add(-time.Second)), Refreshable: true},
		{Server: "wiki", URL: "https://wiki.example/mcp", Agents: []string{"beta"}, Grant: "authorization_code", State: Expired, Expires: at(now)},
	}}
	if !reflect.DeepEqual(want, got) {
		w, _ := json.MarshalIndent(want, "", " ")
		g, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("ForAgents:\nwant %s\ngot  %s", w, g)
	}
	assertNoSecrets(t, got)

	var text bytes.Buffer
	Write(&text, got)
	for _, line := range []string{
		"ci                   no token yet (client credentials: the pool gets one on first use) (used by beta)",
		"linear               signed in at https://auth.linear.example; scopes read write; expires 2030-01-01T13:00:00Z, refreshable (used by alpha, beta)",
		"notes                signed in at https://notes.example; expired 2030-01-01T11:59:59Z, renewed on next use (used by alpha)",
		"wiki                 signed in; expired 2030-01-01T12:00:00Z: switchboard login wiki (used by beta)",
	} {
		if !strings.Contains(text.String(), line+"\n") {
			t.Errorf("text lacks %q:\n%s", line, text.String())
		}
	}
}

func TestForConfigIdentityAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	cfg, err := mcpconfig.Parse("mcp.json", []byte(`{"servers":{"a":{"url":"https://a.example/mcp"},"b":{"url":"https://b.example/mcp"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := &tokenstore.Store{Dir: dir}
	if err := store.Save(&tokenstore.Record{URL: "https://a.example/mcp", Identity: "alice", AccessToken: "AT-SECRET", Scopes: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	// b's file is replaced by garbage that contains a secret: the error
	// must name the file, not quote it.
	if err := store.Save(&tokenstore.Record{URL: "https://b.example/mcp", Identity: "alice", AccessToken: "x"}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), "b.example") {
			os.WriteFile(f, []byte(`{"url": "AT-SECRET`), 0o600)
		}
	}

	alice := ForConfig(cfg, "alice", store, time.Now())
	if len(alice.Servers) != 2 || alice.Servers[0].State != SignedIn || alice.Servers[0].Expires != nil || alice.Servers[1].State != Unreadable || alice.Servers[1].Error == "" {
		t.Fatalf("alice: %+v", alice)
	}
	assertNoSecrets(t, alice)
	// Bob never sees alice's token, nor her broken file.
	bob := ForConfig(cfg, "bob", store, time.Now())
	for _, s := range bob.Servers {
		if s.State != SignedOut || s.Scopes != nil || s.Identity != "bob" {
			t.Fatalf("bob sees %+v", s)
		}
	}
	// Nowhere to read from: everything signed out, nothing fails.
	for _, s := range ForConfig(cfg, "", nil, time.Now()).Servers {
		if s.State != SignedOut {
			t.Fatalf("no store: %+v", s)
		}
	}
}

// assertNoSecrets checks the JSON, the text and every sentence of r.
func assertNoSecrets(t *testing.T, r Report) {
	t.Helper()
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	Write(&text, r)
	for _, out := range []string{string(js), text.String()} {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Fatalf("output holds %s:\n%s", s, out)
			}
		}
	}
}

func TestStoreFor(t *testing.T) {
	t.Setenv(tokenstore.EnvDir, "/from/the/environment")
	if s := StoreFor(nil); s == nil || s.Dir != "/from/the/environment" {
		t.Fatalf("StoreFor(nil) = %+v", s)
	}
	// The agents' environment is the studio's plus Env, the last value
	// winning, as exec.Cmd does.
	if s := StoreFor([]string{tokenstore.EnvDir + "=/first", "OTHER=x", tokenstore.EnvDir + "=/last"}); s == nil || s.Dir != "/last" {
		t.Fatalf("StoreFor(env) = %+v", s)
	}
}

func TestRefusalIsShown(t *testing.T) {
	cfg, err := mcpconfig.Parse("mcp.json", []byte(`{"servers":{"a":{"url":"https://a.example/mcp"},"b":{"url":"https://b.example/mcp"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := &tokenstore.Store{Dir: t.TempDir()}
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	// a: signed in, but the server wants more than the token has.
	store.Save(&tokenstore.Record{URL: "https://a.example/mcp", AccessToken: "AT-SECRET", RefreshToken: "RT-SECRET", Scopes: []string{"read"}})
	store.SaveRefusal(&tokenstore.Refusal{URL: "https://a.example/mcp", At: at, Status: 403, Error: "insufficient_scope", Scope: "read write", Reason: "sign-in required"})
	// b: never signed in, and an agent was refused.
	store.SaveRefusal(&tokenstore.Refusal{URL: "https://b.example/mcp", At: at, Status: 401, Reason: "sign-in required: run `switchboard login b`"})
	r := ForConfig(cfg, "", store, at)
	if len(r.Servers) != 2 || r.Servers[0].Refused == nil || r.Servers[0].State != SignedIn || r.Servers[1].Refused == nil || r.Servers[1].State != SignedOut {
		t.Fatalf("report %+v", r)
	}
	for i, want := range []string{
		"signed in; scopes read; the token does not expire; last refused 2030-01-01T12:00:00Z (403 insufficient_scope, wants scope read write): sign-in required",
		"not signed in (if it asks for OAuth: switchboard login b); last refused 2030-01-01T12:00:00Z (401): sign-in required: run `switchboard login b`",
	} {
		if got := Describe(r.Servers[i]); got != want {
			t.Errorf("Describe(%s) = %q, want %q", r.Servers[i].Server, got, want)
		}
	}
	assertNoSecrets(t, r)
	// Another identity sees neither the token nor the refusal.
	for _, s := range ForConfig(cfg, "bob", store, at).Servers {
		if s.Refused != nil || s.State != SignedOut {
			t.Fatalf("bob sees %+v", s)
		}
	}
}

// TestForAgentsWithRemote: an agent on another host brings no servers of
// its own (its tools/mcp.json is read where it runs, and signed in to
// there); the local agents' servers are reported as before, including
// one that names the remote agent straight at its url.
func TestForAgentsWithRemote(t *testing.T) {
	agents := filepath.Join(t.TempDir(), "agents")
	writeAgent(t, agents, "local", `{"mcpServers":{"far":{"url":"http://far.example:8080/mcp"}}}`)
	if err := os.MkdirAll(filepath.Join(agents, "far"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(agents, "far", "agent.json"), []byte(`{"name":"far","url":"http://far.example:8080/mcp","token_env":"FAR_TOKEN"}`), 0o644)
	defs, err := agentdef.LoadAll(agents)
	if err != nil {
		t.Fatal(err)
	}
	got := ForAgents(defs, &tokenstore.Store{Dir: t.TempDir()}, time.Now())
	if len(got.Servers) != 1 || got.Servers[0].URL != "http://far.example:8080/mcp" || !reflect.DeepEqual(got.Servers[0].Agents, []string{"local"}) || got.Servers[0].State != SignedOut {
		t.Errorf("report %+v, want the local agent's one server, signed out, used by local only", got)
	}
}
