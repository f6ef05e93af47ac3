package askcmd

import (
	"context"
	"errors"
	"io"
)

// startInProcess starts a studio with the bundled agents and the builtin
// model. (Waiting for internal/studio.Start.)
func startInProcess(ctx context.Context, cfg *config, stderr io.Writer) (*studioConn, error) {
	return nil, errors.New("no studio is running and starting one is not available yet")
}
