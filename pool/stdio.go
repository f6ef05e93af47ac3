package pool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stdio servers. The pool runs a stdio server's process itself instead of
// go-sdk's CommandTransport, which reaps the process only on Close: a server
// that dies on its own would then be seen only as a closed connection, its
// exit status and last words lost. Here a goroutine waits for the process
// from the start, so the error of a call (or dial) the death failed carries
// the exit status and the end of the server's stderr.
//
// The environment is an allow-list, as the MCP TypeScript SDK's
// getDefaultEnvironment is: the runtime's own secrets (SWITCHBOARD_TOKEN,
// OPENAI_API_KEY, anything else in its environment) reach a server only when
// its mcp.json "env" names them.

// inheritedEnv are the variables a stdio server inherits from the pool's
// process; its Server.Env adds to (and overrides) them.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

const (
	maxStderrLine  = 1024            // a longer stderr line is cut, so a server cannot make log records large
	stderrTail     = 8               // lines of stderr kept for the error when the server dies
	terminateAfter = 5 * time.Second // after closing stdin, SIGTERM; as long again, SIGKILL
	exitGrace      = time.Second     // how long a failed call waits for the process's exit status
)

// stdioEnv is the environment of srv's process.
func stdioEnv(srv *Server) []string {
	var env []string
	for _, k := range inheritedEnv {
		if _, named := srv.Env[k]; named {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range sortedKeys(srv.Env) {
		env = append(env, k+"="+srv.Env[k])
	}
	return env
}

// A stdioProcess is a running stdio server. It is the io.ReadWriteCloser of
// the session's mcp.IOTransport.
type stdioProcess struct {
	cmd       *exec.Cmd
	stdout    *os.File // read end
	stdin     *os.File // write end
	stderr    *stderrLog
	exited    chan struct{} // closed when the process has exited and its stderr is drained
	waitErr   error         // cmd.Wait's, set before exited is closed
	closeOnce sync.Once
}

// startStdio starts srv's process.
func startStdio(srv *Server, log *slog.Logger) (*stdioProcess, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	sp := &stdioProcess{
		cmd:    exec.Command(srv.Command, srv.Args...),
		stdout: outR,
		stdin:  inW,
		stderr: &stderrLog{log: log, server: srv.Name},
		exited: make(chan struct{}),
	}
	sp.cmd.Env = stdioEnv(srv)
	sp.cmd.Dir = srv.Dir
	sp.cmd.Stdin, sp.cmd.Stdout, sp.cmd.Stderr = inR, outW, sp.stderr
	err = sp.cmd.Start()
	inR.Close() // the child's ends
	outW.Close()
	if err != nil {
		outR.Close()
		inW.Close()
		return nil, fmt.Errorf("starting stdio server %q: %w", srv.Command, err)
	}
	go func() {
		sp.waitErr = sp.cmd.Wait()
		sp.stderr.flush()
		close(sp.exited)
	}()
	return sp, nil
}

func (sp *stdioProcess) Read(p []byte) (int, error)  { return sp.stdout.Read(p) }
func (sp *stdioProcess) Write(p []byte) (int, error) { return sp.stdin.Write(p) }

// Close ends the process as the MCP spec says a client should: close its
// stdin, wait, SIGTERM, wait, SIGKILL. It returns once the process has
// exited.
func (sp *stdioProcess) Close() error {
	sp.closeOnce.Do(func() {
		sp.stdin.Close()
		if !sp.waitFor(terminateAfter) {
			sp.cmd.Process.Signal(syscall.SIGTERM)
			if !sp.waitFor(terminateAfter) {
				sp.cmd.Process.Kill()
				<-sp.exited
			}
		}
		sp.stdout.Close()
	})
	return nil
}

func (sp *stdioProcess) hasExited() bool {
	select {
	case <-sp.exited:
		return true
	default:
		return false
	}
}

func (sp *stdioProcess) waitFor(d time.Duration) bool {
	select {
	case <-sp.exited:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-sp.exited:
		return true
	case <-t.C:
		return false
	}
}

// exitError returns how the process ended, waiting up to d for it, or nil
// when it is still running.
func (sp *stdioProcess) exitError(d time.Duration) *ExitError {
	if !sp.waitFor(d) {
		return nil
	}
	err := sp.waitErr
	if err == nil {
		err = errors.New("exit status 0")
	}
	return &ExitError{Err: err, Stderr: sp.stderr.tailText()}
}

// An ExitError says how a stdio server's process ended, when its end failed
// a request or a dial. Err is exec.Cmd.Wait's error (an *exec.ExitError for
// an exit status or a signal); Stderr is the end of what the server wrote
// on its standard error.
type ExitError struct {
	Err    error
	Stderr string
}

func (e *ExitError) Error() string {
	s := "the stdio server exited: " + e.Err.Error()
	if e.Stderr != "" {
		s += fmt.Sprintf("; its stderr ended with %q", e.Stderr)
	}
	return s
}

func (e *ExitError) Unwrap() error { return e.Err }

// stderrLog logs a stdio server's standard error line by line, with the
// server's name, and keeps the last lines for ExitError.
type stderrLog struct {
	log    *slog.Logger
	server string

	mu   sync.Mutex // protects the fields below
	line []byte     // the line being written, at most maxStderrLine bytes
	cut  bool       // the line being written was longer
	tail []string   // the last stderrTail lines
}

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxStderrLine - len(l.line); len(chunk) > room {
			chunk, l.cut = chunk[:room], true
		}
		l.line = append(l.line, chunk...)
		if i < 0 {
			break
		}
		l.emitLocked()
		p = p[i+1:]
	}
	return n, nil
}

func (l *stderrLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.line) > 0 {
		l.emitLocked()
	}
}

func (l *stderrLog) emitLocked() {
	line := string(l.line)
	if l.cut {
		line += " [cut]"
	}
	l.line, l.cut = l.line[:0], false
	l.log.Info("stdio server stderr", "server", l.server, "line", line)
	if len(l.tail) == stderrTail {
		copy(l.tail, l.tail[1:])
		l.tail = l.tail[:stderrTail-1]
	}
	l.tail = append(l.tail, line)
}

func (l *stderrLog) tailText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.tail, "\n")
}

var _ io.ReadWriteCloser = (*stdioProcess)(nil)
