package console

import (
	"encoding/json"

	"github.com/switchboard-run/switchboard/internal/authstate"
)

// authState is what the Sign-in section shows.
func (s *Console) authState() authstate.Report {
	if s.Auth == nil {
		return authstate.Report{}
	}
	return s.Auth()
}

// authVersion is what of r the page shows, for its ETag: a sign-in happens
// outside the studio (`switchboard login`), and the page must show it.
func authVersion(r authstate.Report) string {
	b, _ := json.Marshal(r) // by value: fmt would print the pointers' addresses
	return string(b)
}
