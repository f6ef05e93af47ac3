package logging

import (
	"net/url"
	"slices"
	"strings"
)

// ServerSecrets returns the values of one configured MCP server (an
// mcp.json entry, its ${VAR}s expanded) that are, or may be, credentials,
// for Scrub: every header value (and its credential: "Bearer X" gives X
// too), every stdio environment value, the URL's password and query
// values, and each part of the URL's path or query that is the value of a
// variable of environ (KEY=VALUE): there it came from a ${VAR}, and a URL's
// own text needs none. The host is never one, so that an error still says
// where. Scrub ignores values shorter than the loggers' minimum, as the
// loggers do.
//
// Whatever quotes a server's URL or headers (an unavailable sibling's
// error holds its URL, query and all) goes through Scrub with these before
// it leaves the process: a tool result, a progress message, a model's
// prompt, a line on the terminal.
func ServerSecrets(rawURL string, headers, env map[string]string, environ []string) []string {
	var out []string
	for _, v := range headers {
		out = append(out, v)
		if _, cred, ok := strings.Cut(v, " "); ok {
			out = append(out, strings.TrimSpace(cred))
		}
	}
	for _, v := range env {
		out = append(out, v)
	}
	if u, err := url.Parse(rawURL); err == nil && rawURL != "" {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
		for _, vs := range u.Query() {
			out = append(out, vs...)
		}
		values := map[string]bool{}
		for _, kv := range environ {
			if _, v, ok := strings.Cut(kv, "="); ok && len(v) >= minURLSecretLen {
				values[v] = true
			}
		}
		parts := strings.FieldsFunc(u.EscapedPath()+"&"+u.RawQuery, func(r rune) bool { return r == '/' || r == '&' || r == '=' })
		for _, part := range parts {
			if p, err := url.PathUnescape(part); err == nil && values[p] {
				out = append(out, p, part)
			}
		}
	}
	out = slices.DeleteFunc(out, func(s string) bool { return len(s) < minSecretLen })
	slices.Sort(out)
	return slices.Compact(out)
}

// minURLSecretLen: an environment value this short found in a URL's path
// is more likely a word of it ("mcp", "v1") than a secret.
const minURLSecretLen = 8

// ArgSecrets returns the values of environ (KEY=VALUE) that a stdio
// server's args hold, whole or as a part of one split at '=', ',', ':'
// or '/' ("--token=X", "user:X"): there they came from a ${VAR}, and a
// failing server's error may quote its command line. An arg of the
// configuration's own text is no secret, so nothing else of args is.
func ArgSecrets(args, environ []string) []string {
	if len(args) == 0 {
		return nil
	}
	values := map[string]bool{}
	for _, kv := range environ {
		if _, v, ok := strings.Cut(kv, "="); ok && len(v) >= minURLSecretLen {
			values[v] = true
		}
	}
	var out []string
	for _, a := range args {
		if values[a] {
			out = append(out, a)
		}
		for _, part := range strings.FieldsFunc(a, func(r rune) bool { return r == '=' || r == ',' || r == ':' || r == '/' }) {
			if part != a && values[part] {
				out = append(out, part)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
