package mcpconfig

import (
	"slices"

	"github.com/switchboard-run/switchboard/internal/logging"
)

// Secrets returns the values in c that are, or may be, credentials: for each
// server what logging.ServerSecrets finds in its URL, headers and
// environment and logging.ArgSecrets in a stdio server's args (with
// environ, the process's, to recognise a ${VAR} expanded into a URL or an
// arg), and its OAuth client secret. Every string built from the
// configuration that leaves the process (a tool result, the model's system
// prompt, a terminal line) is scrubbed of them, as logs are.
func (c *Config) Secrets(environ []string) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, srv := range c.Servers {
		out = append(out, logging.ServerSecrets(srv.URL, srv.Headers, srv.Env, environ)...)
		out = append(out, logging.ArgSecrets(srv.Args, environ)...)
		if srv.OAuth != nil && srv.OAuth.ClientSecret != "" {
			out = append(out, srv.OAuth.ClientSecret)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
