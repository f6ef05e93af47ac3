// Command adapter drives switchboard's pool for the MCP conformance suite's
// client mode (@modelcontextprotocol/conformance): the suite runs it with
// the scenario's server URL as the last argument, the scenario's name in
// MCP_CONFORMANCE_SCENARIO and its context (pre-registered client, keys) in
// MCP_CONFORMANCE_CONTEXT as JSON. Everything goes through pool.Pool, as an
// agent's calls do, with the OAuth flow of pool/oauth.go; the browser is
// played by following the authorization server's redirect, which the
// suite's servers answer at once.
//
// What each scenario does is the suite's own client's: list the tools, then
// call the one the scenario expects.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/pool"
)

func main() {
	// The suite kills a client at its own --timeout (30 s by default), and
	// runs every scenario at once; under load a scenario's OAuth round
	// trips can take a good part of that. The bound is a flag so that the
	// caller can give both the same room (TestClientConformance does), the
	// adapter's a little shorter, so that it says what it was doing
	// rather than being killed.
	timeout := flag.Duration("timeout", 25*time.Second, "how long one scenario may take")
	flag.Parse()
	if flag.NArg() < 1 || *timeout <= 0 {
		log.Fatal("usage: adapter [-timeout D] SERVER_URL (with MCP_CONFORMANCE_SCENARIO set; D > 0)")
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var cctx map[string]any
	if s := os.Getenv("MCP_CONFORMANCE_CONTEXT"); s != "" {
		if err := json.Unmarshal([]byte(s), &cctx); err != nil {
			log.Fatalf("MCP_CONFORMANCE_CONTEXT: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, scenario, flag.Arg(flag.NArg()-1), cctx); err != nil {
		cancel()
		log.Fatalf("scenario %q: %v", scenario, err)
	}
}

func run(ctx context.Context, scenario, serverURL string, cctx map[string]any) error {
	dir, err := os.MkdirTemp("", "switchboard-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	p := pool.New(&pool.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Elicit: acceptDefaults, Notifications: true, OAuth: &pool.OAuthOptions{TokenDir: dir, Interactive: &pool.Interactive{
		RedirectURL: "http://localhost:3000/callback",
		Fetch:       followRedirect,
	}}})
	defer p.Close()
	srv := &pool.Server{Name: "conformance", URL: serverURL}
	id, _ := cctx["client_id"].(string)
	secret, _ := cctx["client_secret"].(string)
	key, _ := cctx["private_key_pem"].(string)
	alg, _ := cctx["signing_algorithm"].(string)
	idToken, _ := cctx["idp_id_token"].(string)
	switch {
	case idToken != "":
		// Enterprise-managed authorization: the suite plays the person's
		// sign-in at the identity provider and hands over its ID token.
		idpIssuer, _ := cctx["idp_issuer"].(string)
		idpToken, _ := cctx["idp_token_endpoint"].(string)
		idpClient, _ := cctx["idp_client_id"].(string)
		srv.OAuth = &pool.OAuthConfig{ClientID: id, ClientSecret: secret, Enterprise: &pool.EnterpriseConfig{
			IdPIssuer: idpIssuer, IdPTokenEndpoint: idpToken, IdPClientID: idpClient,
			IDToken: func(context.Context) (string, error) { return idToken, nil },
		}}
	case strings.HasPrefix(scenario, "auth/client-credentials"):
		srv.OAuth = &pool.OAuthConfig{Grant: pool.GrantClientCredentials, ClientID: id, ClientSecret: secret, PrivateKeyPEM: key, SigningAlgorithm: alg}
	default:
		// The suite's own clients offer this Client ID Metadata Document
		// URL; its authorization servers take it without fetching it.
		srv.OAuth = &pool.OAuthConfig{ClientID: id, ClientSecret: secret, ClientMetadataURL: "https://conformance-test.local/client-metadata.json"}
	}

	tools, err := p.ListTools(ctx, srv)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	call := func(name string, args map[string]any) error {
		if !slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == name }) {
			return fmt.Errorf("the server lists no tool %q", name)
		}
		_, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: name, Arguments: args})
		return err
	}
	switch {
	case scenario == "initialize":
		return nil
	case scenario == "tools_call":
		return call("add_numbers", map[string]any{"a": 5, "b": 3})
	case scenario == "sse-retry":
		return call("test_reconnection", map[string]any{})
	case scenario == "elicitation-sep1034-client-defaults":
		return call("test_client_elicitation_defaults", map[string]any{})
	case strings.HasPrefix(scenario, "auth/"):
		return call("test-tool", map[string]any{})
	}
	return fmt.Errorf("unknown scenario %q", scenario)
}

// acceptDefaults is a person who accepts what the form proposes: the
// pool's client fills in the schema's defaults (SEP-1034).
func acceptDefaults(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
}

// followRedirect is the browser: the suite's authorization servers approve
// at once and redirect to the callback with the code.
func followRedirect(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, fmt.Errorf("authorization redirect: %w", err)
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}
