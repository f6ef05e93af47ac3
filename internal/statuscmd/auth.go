package statuscmd

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// authStatus is `switchboard status --auth`: read from the token store,
// so it needs no studio.
func authStatus(config string, asJSON bool, stdout, stderr io.Writer) int {
	cfg, err := mcpconfig.Load(config)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard status: %v\n", err)
		return 1
	}
	r := authstate.ForConfig(cfg, "", authstate.StoreFor(nil), time.Now())
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(stderr, "switchboard status: writing the status: %v\n", err)
			return 1
		}
		return 0
	}
	authstate.Write(stdout, r)
	return 0
}
