// Package abacus is the calculating agent's toolset: arithmetic
// (calculate), unit conversion (convert_units) and calendar arithmetic
// (date_math), all computed offline and deterministically, so that a
// coordinator delegating to abacus gets a checked answer instead of a
// model's guess.
package abacus

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Register adds abacus's tools to s: calculate, convert_units and date_math.
// abacus holds no state, so there is nothing to close.
func Register(s *mcp.Server) error {
	if s == nil {
		return errors.New("abacus: nil server")
	}
	addTools(s)
	return nil
}
