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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-run/switchboard/internal/logging"
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

// A line of a stdio server's stdout is one JSON-RPC message, and go-sdk's
// decoder holds all of it before it is parsed: a server's
// Server.MaxResultBytes (mcp.json "maxResultBytes") bounds it as it bounds
// an HTTP answer's body. The count is of the bytes since the last newline,
// made as they are read; past the cap Read fails with a
// *ResultTooLargeError, the decoder (and the partial line it held) is
// dropped with the session, and the pool restarts the process: the rest
// of the line is still in the pipe, so the session cannot go on.

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

// stdioSecrets are the values of srv's configuration that its standard
// error must not repeat: every env value, and what logging.ArgSecrets finds
// in its args.
func stdioSecrets(srv *Server) []string {
	return append(logging.ServerSecrets("", nil, srv.Env, nil), logging.ArgSecrets(srv.Args, os.Environ())...)
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

	maxLine int64 // the server's MaxResultBytes
	server  string
	line    int64                               // bytes read since the last newline; only Read (go-sdk's one reading goroutine) touches it
	tooBig  atomic.Pointer[ResultTooLargeError] // set when a line passed maxLine
	sawBig  atomic.Bool                         // a line passed bigAnswer since the pool last looked (memory.go)
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
		stderr: &stderrLog{log: log, server: srv.Name, secrets: stdioSecrets(srv)},
		exited: make(chan struct{}),

		maxLine: srv.maxResultBytes(),
		server:  srv.Name,
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

// Read reads the server's stdout, and fails once a line passes the cap
// (see the top of this file); every Read after fails the same.
func (sp *stdioProcess) Read(p []byte) (int, error) {
	if e := sp.tooBig.Load(); e != nil {
		return 0, e
	}
	n, err := sp.stdout.Read(p)
	if over := sp.countLine(p[:n]); over {
		e := &ResultTooLargeError{Server: sp.server, Limit: sp.maxLine, Size: -1}
		sp.tooBig.Store(e)
		return 0, e
	}
	return n, err
}

// countLine adds b to the current line's count, and reports whether a line
// passed the cap.
func (sp *stdioProcess) countLine(b []byte) bool {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			sp.line += int64(len(b))
			sp.noteBig()
			return sp.line > sp.maxLine
		}
		sp.line += int64(i)
		sp.noteBig()
		if sp.line > sp.maxLine {
			return true
		}
		sp.line, b = 0, b[i+1:]
	}
	return false
}

// noteBig records a line that passed bigAnswer (memory.go).
func (sp *stdioProcess) noteBig() {
	if sp.line > bigAnswer {
		sp.sawBig.Store(true)
	}
}

// overCap is the error of the line that passed the cap, or nil.
func (sp *stdioProcess) overCap() *ResultTooLargeError { return sp.tooBig.Load() }

func (sp *stdioProcess) Write(p []byte) (int, error) { return sp.stdin.Write(p) }

// Close ends the process as the MCP spec says a client should: close its
// stdin, wait, SIGTERM, wait, SIGKILL. It returns once the process has
// exited.
func (sp *stdioProcess) Close() error {
	sp.closeOnce.Do(func() {
		if sp.tooBig.Load() != nil {
			// The rest of the over-cap line is still being written: with
			// the pipe's read end closed, the server's write fails (EPIPE,
			// SIGPIPE) instead of blocking until SIGTERM.
			sp.stdout.Close()
		}
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
	// secrets are the server's configured values that may be credentials
	// (its env, the args a ${VAR} filled): a server that fails may print
	// its command line or environment, and each line, logged and kept for
	// ExitError (whose text reaches the model and the console), is
	// scrubbed of them and of the environment's, as the logs are.
	secrets []string

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
	line = logging.Scrub(line, l.secrets...)
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
