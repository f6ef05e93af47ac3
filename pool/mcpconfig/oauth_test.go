package mcpconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/pool"
)

func TestOAuthField(t *testing.T) {
	env := map[string]string{"SECRET": "s3cret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := Parse("mcp.json", []byte(`{"mcpServers":{
		"linear":{"type":"http","url":"https://mcp.example/mcp","oauth":{"clientId":"abc","callbackPort":8080,"scopes":"read write","authServerMetadataUrl":"https://as.example/.well-known/oauth-authorization-server"}},
		"jobs":{"url":"https://jobs.example/mcp","oauth":{"grant":"client_credentials","clientId":"agent","clientSecret":"${SECRET}","tokenEndpointAuthMethod":"client_secret_post","scopes":["jobs"]}}}}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := cfg.Server("linear")
	if o := l.Pool().OAuth; o == nil || o.ClientID != "abc" || o.CallbackPort != 8080 || strings.Join(o.Scopes, ",") != "read,write" {
		t.Fatalf("linear oauth = %+v", l.OAuth)
	}
	if len(cfg.Ignored) != 1 || !strings.Contains(cfg.Ignored[0], "authServerMetadataUrl") {
		t.Errorf("ignored = %q, want authServerMetadataUrl named", cfg.Ignored)
	}
	j, _ := cfg.Server("jobs")
	if o := j.OAuth; o.Grant != pool.GrantClientCredentials || o.ClientSecret != "s3cret" || o.TokenEndpointAuthMethod != pool.AuthMethodPost || o.Scopes[0] != "jobs" {
		t.Fatalf("jobs oauth = %+v", j.OAuth)
	}
}

func TestOAuthPrivateKeyFile(t *testing.T) {
	dir := t.TempDir()
	pem := "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"
	if err := os.WriteFile(filepath.Join(dir, "agent.pem"), []byte(pem), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(filepath.Join(dir, "mcp.json"), []byte(`{"servers":{"jobs":{"url":"https://jobs.example/mcp","oauth":{
		"grant":"client_credentials","clientId":"agent","privateKeyFile":"agent.pem","signingAlgorithm":"ES256","tokenEndpointAuthMethod":"private_key_jwt"}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Servers[0].OAuth; o.PrivateKeyPEM != pem || o.SigningAlgorithm != "ES256" {
		t.Fatalf("oauth = %+v", o)
	}
	if err := os.WriteFile(filepath.Join(dir, "not.pem"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Parse(filepath.Join(dir, "mcp.json"), []byte(`{"servers":{"jobs":{"url":"https://jobs.example/mcp","oauth":{"privateKeyFile":"not.pem"}}}}`), nil)
	if ce, ok := errors.AsType[*ConfigError](err); !ok || ce.Field != "oauth.privateKeyFile" {
		t.Fatalf("err = %v, want a ConfigError on oauth.privateKeyFile", err)
	}
}

func TestOAuthFieldErrors(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"url":"https://x/mcp","oauth":"yes"}`, "oauth"},
		{`{"url":"https://x/mcp","oauth":{"clientID":"a"}}`, "oauth.clientID"},
		{`{"url":"https://x/mcp","oauth":{"callbackPort":0}}`, "oauth.callbackPort"},
		{`{"url":"https://x/mcp","oauth":{"callbackPort":"80"}}`, "oauth.callbackPort"},
		{`{"url":"https://x/mcp","oauth":{"grant":"password"}}`, "oauth.grant"},
		{`{"url":"https://x/mcp","oauth":{"grant":"client_credentials","clientId":"a"}}`, "oauth.grant"},
		{`{"url":"https://x/mcp","oauth":{"tokenEndpointAuthMethod":"private_key_jwt"}}`, "oauth.tokenEndpointAuthMethod"},
		{`{"url":"https://x/mcp","oauth":{"scopes":" "}}`, "oauth.scopes"},
		{`{"command":"x","oauth":{}}`, "oauth"},
		{`{"url":"https://x/mcp","oauth":{"privateKeyFile":"missing.pem"}}`, "oauth.privateKeyFile"},
		{`{"url":"https://x/mcp","oauth":{"signingAlgorithm":"HS256"}}`, "oauth.signingAlgorithm"},
		{`{"url":"https://x/mcp","oauth":{"clientMetadataUrl":"http://x/client.json"}}`, "oauth.clientMetadataUrl"},
	} {
		_, err := Parse("mcp.json", []byte(`{"mcpServers":{"s":`+tc.body+`}}`), nil)
		ce, ok := errors.AsType[*ConfigError](err)
		if !ok || ce.Field != tc.field {
			t.Errorf("%s: err = %v, want a ConfigError on field %q", tc.body, err, tc.field)
		}
	}
}
