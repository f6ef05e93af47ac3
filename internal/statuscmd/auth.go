package statuscmd

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/switchboard-run/switchboard/internal/logincmd"
)

// authStatus is `switchboard status --auth`: read from the token store,
// so it needs no studio.
func authStatus(config string, asJSON bool, stdout, stderr io.Writer) int {
	states, err := logincmd.AuthStates(config, "", "")
	if err != nil {
		fmt.Fprintf(stderr, "switchboard status: %v\n", err)
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"servers": states})
		return 0
	}
	logincmd.WriteAuthStates(stdout, states)
	return 0
}
