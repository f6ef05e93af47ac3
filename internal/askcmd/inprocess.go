package askcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/runtime"
)

// readyTimeout bounds the wait for a studio ask started to bring its agents
// up. Agents start in parallel and listen within a second; the bound is for
// one that hangs, which is then reported while the task still goes ahead.
const readyTimeout = 30 * time.Second

// logName is the file, under <dir>/.switchboard, that receives the log
// lines of the agents of a studio ask started (on the terminal they would
// bury the delegations): one per run, named by its start time and the
// process id, so that parallel asks never share or overwrite one.
func logName(now time.Time) string {
	return fmt.Sprintf("ask-studio-%s-%d.log", now.UTC().Format("20060102T150405.000Z"), os.Getpid())
}

// keptLogs is how many ask-studio logs a project keeps: every ask that
// starts a studio writes one, and nothing else removes them.
const keptLogs = 10

// pruneLogs removes the oldest ask-studio logs in stateDir so that, with
// the one about to be written, at most keptLogs remain. Their names sort by
// start time. A log that cannot be removed is left (it is only a log); a
// directory that cannot be read is said.
func pruneLogs(stateDir string) error {
	logs, err := filepath.Glob(filepath.Join(stateDir, "ask-studio-*.log"))
	if err != nil {
		return err
	}
	slices.Sort(logs)
	for len(logs) >= keptLogs {
		os.Remove(logs[0])
		logs = logs[1:]
	}
	return nil
}

// startInProcess starts a studio for cfg.dir's agents on an ephemeral
// loopback port, with the agents' own model settings (the builtin model for
// the bundled agents) unless --model names another.
func startInProcess(ctx context.Context, cfg *config, stderr io.Writer) (*studioConn, error) {
	agentsDir := filepath.Join(cfg.dir, "agents")
	if _, err := os.Stat(agentsDir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no studio at %s, and no agents/ in %s to start one with: run ask in the switchboard project directory, pass --dir, or start a studio with `switchboard up`", cfg.studioURL, absOr(cfg.dir))
	}
	stateDir := filepath.Join(cfg.dir, ".switchboard")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("starting a studio: %w", err)
	}
	if err := pruneLogs(stateDir); err != nil {
		fmt.Fprintf(stderr, "· old studio logs in %s not pruned: %v\n", stateDir, err)
	}
	logPath := filepath.Join(stateDir, logName(time.Now()))
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("starting a studio: %w", err)
	}
	var env []string
	if cfg.model != "" {
		env = append(env, "OPENAI_MODEL="+cfg.model) // read by runtime in each agent
	}
	if cfg.modelTimeout > 0 {
		env = append(env, runtime.EnvModelTimeout+"="+cfg.modelTimeout.String())
	}
	// The studio's own lines go to the same file as its agents', in the
	// same format; parseArgs checked it.
	logger, err := logging.New(logFile, cfg.logFormat, slog.LevelInfo)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting a studio: %w", err)
	}
	st, err := studio.Start(ctx, &studio.Options{
		Dir:         cfg.dir,
		Listen:      "127.0.0.1:0",
		Env:         env,
		AgentOutput: logFile,
		Logger:      logger,
		LogFormat:   cfg.logFormat,
	})
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("no studio at %s, and starting one failed: %w", cfg.studioURL, err)
	}
	fmt.Fprintf(stderr, "· no studio at %s: started one at %s for this task (agent logs: %s)\n", cfg.studioURL, st.URL(), logPath)

	readyCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	err = st.WaitReady(readyCtx)
	cancel()
	if ctx.Err() != nil {
		return nil, errors.Join(ctx.Err(), st.Close(), logFile.Close())
	}
	if err != nil {
		// The task may not need the agent that is down; the call will say
		// so if it does.
		fmt.Fprintf(stderr, "· %v\n", err)
	}
	return &studioConn{url: st.URL(), close: func() error {
		return errors.Join(st.Close(), logFile.Close())
	}}, nil
}

func absOr(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}
