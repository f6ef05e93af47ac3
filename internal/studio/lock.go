package studio

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/switchboard-run/switchboard/internal/dirlock"
)

// lockProject takes the project's state directory (<dir>/.switchboard,
// where the agents' data directories are) for this studio, serving at url.
// A second studio on the project is refused, naming the first and where
// it serves, so that a person can point `switchboard ask --studio` or a
// client at it instead.
func lockProject(dir, url string) (*dirlock.Lock, error) {
	state := filepath.Join(dir, ".switchboard")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("studio: %w", err)
	}
	l, err := dirlock.Acquire(state, "studio at "+url)
	if err != nil {
		return nil, fmt.Errorf("studio: the project %s: %w", dir, err)
	}
	return l, nil
}
