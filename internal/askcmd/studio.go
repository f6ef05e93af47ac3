package askcmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// healthTimeout bounds the check for a running studio: a studio on loopback
// answers at once, and a port nobody listens on refuses at once; the bound
// is for a listener that accepts and never answers.
const healthTimeout = 2 * time.Second

// studioConn is the studio a task goes through.
type studioConn struct {
	url   string
	close func() error // stops a studio ask started; a no-op for a running one
}

// reachStudio returns the studio at cfg.studioURL when it answers /healthz.
// Otherwise, unless the URL was given explicitly (then its absence is the
// error), it starts one in-process on an ephemeral loopback port.
func reachStudio(ctx context.Context, cfg *config, stderr io.Writer) (*studioConn, error) {
	err := healthy(ctx, cfg.studioURL)
	if err == nil {
		if cfg.model != "" {
			fmt.Fprintf(stderr, "switchboard ask: --model applies to a studio ask starts; the studio at %s keeps its own model settings\n", cfg.studioURL)
		}
		return &studioConn{url: cfg.studioURL, close: func() error { return nil }}, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if cfg.explicit {
		return nil, fmt.Errorf("no studio at %s: %w", cfg.studioURL, err)
	}
	return startInProcess(ctx, cfg, stderr)
}

// healthy checks GET <url>/healthz for a 200.
func healthy(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz: %s", resp.Status)
	}
	return nil
}
