package askcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
		if cfg.model != "" || cfg.modelTimeout != 0 {
			fmt.Fprintf(stderr, "switchboard ask: --model and --model-timeout apply to a studio ask starts; the studio at %s keeps its own model settings\n", cfg.studioURL)
		}
		if err := checkAgent(ctx, cfg, cfg.studioURL); err != nil {
			return nil, err
		}
		return &studioConn{url: cfg.studioURL, close: func() error { return nil }}, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if cfg.explicit {
		return nil, fmt.Errorf("no studio at %s: %w", cfg.studioURL, err)
	}
	st, err := startInProcess(ctx, cfg, stderr)
	if err != nil {
		return nil, err
	}
	if err := checkAgent(ctx, cfg, st.url); err != nil {
		return nil, errors.Join(err, st.close())
	}
	return st, nil
}

// errUnknownAgent: the studio has no agent of the --agent name.
var errUnknownAgent = errors.New("unknown agent")

// checkAgent asks the studio for its agents and fails, listing them, when
// cfg.agent is not one of them. A studio that cannot say (an older one, a
// proxy in front) is taken at its word: the call will tell.
func checkAgent(ctx context.Context, cfg *config, base string) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/overview", nil)
	if err != nil {
		return nil
	}
	if cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var ov struct {
		Agents []struct {
			Name string `json:"name"`
		} `json:"agents"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&ov) != nil || len(ov.Agents) == 0 {
		return nil
	}
	var names []string
	for _, a := range ov.Agents {
		if a.Name == cfg.agent {
			return nil
		}
		names = append(names, a.Name)
	}
	return fmt.Errorf("%w %q: the studio at %s has %s; pick one with --agent", errUnknownAgent, cfg.agent, base, strings.Join(names, ", "))
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
