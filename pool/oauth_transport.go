package pool

// The RoundTripper that sends a key's token and recovers, once, from a
// refusal (oauth.go says when a resend is safe). A refusal's
// WWW-Authenticate is parsed once, into a refusal, which every step after
// it reads: whether it is a step-up, what the grant asks for, what is
// recorded for `switchboard status`.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// A refusal is a 401 or 403 as the OAuth code reads it: the status and the
// challenges of its WWW-Authenticate (RFC 9110 §11.6.1, RFC 6750 §3),
// parsed once.
type refusal struct {
	status     int
	challenges []oauthex.Challenge
	// resp is the refusal with a body that can be read again (newResp),
	// for go-sdk's authorization handler, which reads it.
	resp *http.Response
	body []byte
}

// parseRefusal reads resp's challenges. A header that does not parse is
// no challenge: the refusal is then judged by its status alone, as before.
func parseRefusal(resp *http.Response, body []byte) *refusal {
	cs, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	return &refusal{status: resp.StatusCode, challenges: cs, resp: resp, body: body}
}

// param is the named parameter of the first Bearer challenge that has it.
func (r *refusal) param(name string) string { return challengeParam(r.challenges, name) }

// stepUp: a 403 asking for more scope (MCP authorization, "Scope
// Challenge Handling"; RFC 6750 §3.1 insufficient_scope).
func (r *refusal) stepUp() bool {
	return r.status == http.StatusForbidden && r.param("error") == "insufficient_scope"
}

// wanted reports whether a token may answer the refusal: a 401, or a
// step-up 403.
func (r *refusal) wanted() bool { return r.status == http.StatusUnauthorized || r.stepUp() }

// newResp is the refusal as it came, with its kept body readable anew.
func (r *refusal) newResp() *http.Response {
	out := *r.resp
	out.Body = io.NopCloser(bytes.NewReader(r.body))
	return &out
}

func challengeParam(cs []oauthex.Challenge, name string) string {
	for _, c := range cs {
		if strings.EqualFold(c.Scheme, "bearer") && c.Params[name] != "" {
			return c.Params[name]
		}
	}
	return ""
}

// oauthTransport sends a request with the key's token and recovers once
// from a 401 or a step-up 403.
type oauthTransport struct {
	base http.RoundTripper
	a    *authenticator
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	rec, err := t.a.current(ctx)
	if err != nil {
		// Nothing was sent: the caller gave up waiting, or the stored
		// token cannot be read (the error names the file).
		return nil, err
	}
	resp, err := t.send(req, rec)
	for tries := 0; err == nil && tries < maxAuthRetries && challenged(resp) && replayable(req) && sameOrigin(req.URL, t.a.key.URL); tries++ {
		// Keep the refusal: it is the answer when no token can be had, and
		// the authorization handler consumes the body it is given.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxChallengeBody))
		resp.Body.Close()
		r := parseRefusal(resp, body)
		fresh, ferr := t.a.recover(ctx, req, r, rec)
		if errors.Is(ferr, errGaveUpWaiting) {
			return nil, ferr // the caller's context ended; the flow goes on for the others
		}
		// Only a server that names its protected-resource metadata says it
		// speaks OAuth; any other 401 (a static token missing) is its own
		// business and goes up as it came.
		oauth := r.param("resource_metadata") != "" || rec != nil || t.a.cfg != nil
		if ferr != nil && oauth {
			t.a.log.WarnContext(ctx, "no token for the server", "server", t.a.name, "status", resp.StatusCode, "error", ferr)
			t.a.noteRefusal(r, ferr)
		}
		if (errors.Is(ferr, ErrLoginRequired) || errors.Is(ferr, ErrTokenStore)) && oauth && isInitialize(req) {
			// A session that cannot start until a person signs in (or
			// fixes the token file): the dial fails with an error that
			// says what to do (and, as a dial failure, that nothing ran).
			// Mid-session the 401 itself goes up instead, so that classify
			// keeps judging it.
			return nil, ferr
		}
		if ferr != nil || fresh == nil {
			// Nothing ran and nothing better is known: the server's own
			// refusal goes back up, where it is classified as any 401.
			return r.newResp(), nil
		}
		rec = fresh
		again := req.Clone(ctx)
		if req.GetBody != nil {
			if again.Body, err = req.GetBody(); err != nil {
				return r.newResp(), nil
			}
		}
		resp, err = t.send(again, rec)
		if err == nil && challenged(resp) {
			if again := parseRefusal(resp, nil); again.wanted() {
				t.a.noteRefusal(again, nil) // the token just got was refused too
			}
		}
	}
	return resp, err
}

func (t *oauthTransport) send(req *http.Request, rec *tokenstore.Record) (*http.Response, error) {
	if rec == nil || !sameOrigin(req.URL, t.a.key.URL) {
		// The token is for its server's origin only (origin.go): the
		// entry's client refuses a redirect elsewhere, and should one
		// reach here anyway it goes without.
		return t.base.RoundTrip(req)
	}
	out := req.Clone(req.Context()) // a RoundTripper must not modify its request
	out.Header.Set("Authorization", "Bearer "+rec.AccessToken)
	return t.base.RoundTrip(out)
}

func challenged(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
}

// replayable: the body can be sent again (or there is none).
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}
