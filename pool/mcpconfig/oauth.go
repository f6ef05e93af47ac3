package mcpconfig

// "oauth" on an HTTP server, in Claude Code's dialect (.mcp.json:
// "oauth": {"clientId", "callbackPort", "scopes": "a b",
// "authServerMetadataUrl"}) plus what a headless agent needs and Claude
// Code keeps out of its file: "clientSecret" (write it as ${VAR}), "grant"
// and "tokenEndpointAuthMethod". A server without "oauth" still gets OAuth
// when it answers 401 (see pool/oauth.go). For private_key_jwt,
// "privateKeyFile" names a PEM file relative to the mcp.json and
// "signingAlgorithm" is ES256 or RS256; "clientMetadataUrl" is the client's
// Client ID Metadata Document.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchboard-run/switchboard/internal/strictjson"
	"github.com/switchboard-run/switchboard/pool"
)

var oauthFields = []string{"clientId", "clientSecret", "callbackPort", "scopes", "grant", "tokenEndpointAuthMethod", "privateKeyFile", "signingAlgorithm", "clientMetadataUrl", "authServerMetadataUrl"}

func (sp *serverParser) oauth(raw json.RawMessage) (*pool.OAuthConfig, error) {
	if k := strictjson.Kind(raw); k != "object" {
		return nil, sp.fail("oauth", string(raw), "want an object, got %s", k)
	}
	ms, err := strictjson.Members(raw)
	if dup, ok := errors.AsType[*strictjson.DuplicateKeyError](err); ok {
		return nil, sp.fail("oauth."+dup.Key, "", "duplicate field")
	} else if err != nil {
		return nil, sp.walkErr(sp.name, err)
	}
	o := &pool.OAuthConfig{}
	wantKey := false
	for _, m := range ms {
		field := "oauth." + m.Key
		if m.Key == "callbackPort" {
			var port float64
			if strictjson.Kind(m.Raw) != "number" || json.Unmarshal(m.Raw, &port) != nil || port != float64(int(port)) || port < 1 || port > 65535 {
				return nil, sp.fail(field, string(m.Raw), "want a port number between 1 and 65535")
			}
			o.CallbackPort = int(port)
			continue
		}
		if m.Key == "scopes" && strictjson.Kind(m.Raw) == "array" {
			if o.Scopes, err = sp.strs(strictjson.Member{Key: field, Raw: m.Raw}); err != nil {
				return nil, err
			}
			continue
		}
		if !containsField(oauthFields, m.Key) {
			return nil, sp.fail(field, "", "unknown field; known fields are %s%s", strings.Join(oauthFields, ", "), hint(m.Key, oauthFields...))
		}
		s, err := sp.str(field, m.Raw)
		if err != nil {
			return nil, err
		}
		// The secret's value is never quoted in an error: only its name.
		v, err := sp.expand(field, s)
		if err != nil {
			return nil, err
		}
		switch m.Key {
		case "clientId":
			o.ClientID = v
		case "clientSecret":
			o.ClientSecret = v
		case "scopes":
			o.Scopes = strings.Fields(v)
			if len(o.Scopes) == 0 {
				return nil, sp.fail(field, s, "scopes is empty")
			}
		case "grant":
			if g := pool.Grant(v); g != pool.GrantAuthorizationCode && g != pool.GrantClientCredentials {
				return nil, sp.fail(field, v, "unknown grant %s; want %q or %q", strconv.Quote(v), pool.GrantAuthorizationCode, pool.GrantClientCredentials)
			}
			o.Grant = pool.Grant(v)
		case "tokenEndpointAuthMethod":
			switch m := pool.AuthMethod(v); m {
			case pool.AuthMethodBasic, pool.AuthMethodPost:
				o.TokenEndpointAuthMethod = m
			case pool.AuthMethodPrivateKeyJWT:
				wantKey = true // the key itself selects it
			default:
				return nil, sp.fail(field, v, "unknown method %s; want %q, %q or %q", strconv.Quote(v), pool.AuthMethodBasic, pool.AuthMethodPost, pool.AuthMethodPrivateKeyJWT)
			}
		case "privateKeyFile":
			path := v
			if !filepath.IsAbs(path) {
				path = filepath.Join(sp.base(), path)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, &ConfigError{File: sp.file, Server: sp.name, Field: field, Value: s, Msg: "cannot read " + path, Err: errors.Unwrap(err)}
			}
			if !bytes.Contains(data, []byte("PRIVATE KEY-----")) {
				return nil, sp.fail(field, s, "%s is not a PEM private key", path)
			}
			o.PrivateKeyPEM = string(data)
		case "signingAlgorithm":
			if v != "ES256" && v != "RS256" {
				return nil, sp.fail(field, v, `unknown algorithm %s; want "ES256" or "RS256"`, strconv.Quote(v))
			}
			o.SigningAlgorithm = v
		case "clientMetadataUrl":
			if u, err := url.Parse(v); err != nil || u.Scheme != "https" || u.Path == "" || u.Path == "/" {
				return nil, sp.fail(field, v, "want an https URL with a path (the client's metadata document)")
			}
			o.ClientMetadataURL = v
		case "authServerMetadataUrl":
			sp.ignored = append(sp.ignored, fmt.Sprintf("%s: server %q: field %q is ignored: the authorization server is found from the server's protected-resource metadata", sp.file, sp.name, field))
		}
	}
	if wantKey && o.PrivateKeyPEM == "" {
		return nil, sp.fail("oauth.tokenEndpointAuthMethod", pool.AuthMethodPrivateKeyJWT, "private_key_jwt needs oauth.privateKeyFile")
	}
	if o.Grant == pool.GrantClientCredentials && (o.ClientID == "" || o.ClientSecret == "" && o.PrivateKeyPEM == "") {
		return nil, sp.fail("oauth.grant", string(o.Grant), "the client_credentials grant needs oauth.clientId and oauth.clientSecret or oauth.privateKeyFile")
	}
	return o, nil
}

func containsField(fields []string, f string) bool {
	for _, x := range fields {
		if x == f {
			return true
		}
	}
	return false
}
