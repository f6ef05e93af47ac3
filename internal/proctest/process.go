// Package proctest runs commands under test as real processes: started,
// waited for on a ready line, their output captured, killed at test cleanup
// if still running, and their exit told apart from a kill.
package proctest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a command under test that announces readiness with one line on
// stdout.
type Process struct {
	Cmd *exec.Cmd
	// Ready is the rest of the ready line, after the prefix.
	Ready string

	stderr *SyncBuffer
	done   chan struct{} // closed when the process has exited and been reaped
	err    error         // Wait's error; read after done
}

// StartProcess runs bin with args in dir and waits (up to timeout) for a
// stdout line starting with prefix. The process is killed at test cleanup if
// it is still running.
func StartProcess(t testing.TB, dir string, env []string, timeout time.Duration, prefix, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{Cmd: exec.Command(bin, args...), stderr: &SyncBuffer{}, done: make(chan struct{})}
	p.Cmd.Dir = dir
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stderr = p.stderr
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		// Read stdout to its end (so the process never blocks on it), then
		// reap the process; Wait must come after the reads.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				select {
				case ready <- rest:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.Cmd.Process.Kill()
			<-p.done
		}
	})
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case p.Ready = <-ready:
		return p
	case <-p.done:
		t.Fatalf("%s exited before printing %q: %v\nstderr:\n%s", bin, prefix, p.err, p.Stderr())
	case <-timer.C:
		t.Fatalf("%s did not print %q within %v\nstderr:\n%s", bin, prefix, timeout, p.Stderr())
	}
	return nil
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 if it was killed by a signal).
func (p *Process) Wait(timeout time.Duration) (code int, err error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		return 0, errors.New("process did not exit in time")
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, p.err
}

// Stderr is what the process wrote on stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// Alive reports whether pid names a live process (not a zombie).
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers, for capturing a
// process's output, that a test can wait on for a text to appear.
type SyncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write; nil until a WaitFor
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor returns once the buffer contains text, or fails t when ctx ends
// first.
func (s *SyncBuffer) WaitFor(t testing.TB, ctx context.Context, text string) {
	t.Helper()
	for {
		s.mu.Lock()
		if strings.Contains(s.b.String(), text) {
			s.mu.Unlock()
			return
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("output never contained %q:\n%s", text, s)
		}
	}
}
