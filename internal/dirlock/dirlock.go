// Package dirlock keeps a data directory to one process.
//
// An agent's data directory holds SQLite files (its ledger, its journal,
// packrat's archive) whose guarantees assume one writer process: two
// agent processes on one directory would each take the other's running
// calls for interrupted ones (docs/IDEMPOTENCY.md), and two studios on one
// project would start two processes of every agent on the same
// directories. SQLite's own locking keeps the files consistent but not
// those assumptions, so the directory is locked as a whole.
//
// The lock is flock(2) on a file in the directory: the kernel releases it
// when the process dies however it dies, so a SIGKILLed process never
// leaves a stale lock behind, and the next process takes it at once. The
// file also names its holder, for the error the second process gives.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FileName is the lock file in a locked directory.
const FileName = ".lock"

// ErrLocked is the error of Acquire on a directory another process holds
// (or this process, through another Acquire).
var ErrLocked = errors.New("directory in use by another process")

// HeldError is what Acquire returns for a held directory: which directory,
// and the holder as its lock file names it. It matches ErrLocked.
type HeldError struct {
	Dir    string
	Holder string // "pid 123: agent packrat, since 2026-12-02T02:00:00Z", or "" if unreadable
}

func (e *HeldError) Error() string {
	who := e.Holder
	if who == "" {
		who = "a process that did not say who it is"
	}
	return fmt.Sprintf("%s is in use by %s; stop it first, or give this one another directory", e.Dir, who)
}

func (e *HeldError) Is(target error) bool { return target == ErrLocked }

// Lock is a held directory lock.
type Lock struct {
	f *os.File
}

// Acquire locks dir (which must exist) for this process, recording what
// holds it (for example "agent packrat" or "studio") in the lock file. It
// does not wait: a held directory is an error at once (a *HeldError).
//
// The caller must keep the Lock reachable for as long as it means to hold
// the directory, typically in the struct that Release is called from: a
// Lock dropped without Release is released at an arbitrary later garbage
// collection, when the runtime's finalizer closes its file.
func Acquire(dir, what string) (*Lock, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			return nil, &HeldError{Dir: dir, Holder: holder(b)}
		}
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	// Ours now: say who holds it. A failure here leaves the lock held
	// and only the error message poorer, so it is not fatal.
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "%d\n%s\n%s\n", os.Getpid(), what, time.Now().UTC().Format(time.RFC3339))
		f.Sync()
	}
	return &Lock{f: f}, nil
}

// holder renders the lock file's content for HeldError.
func holder(b []byte) string {
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 3)
	if len(lines) != 3 {
		return ""
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil {
		return ""
	}
	return fmt.Sprintf("pid %d: %s, since %s", pid, strings.TrimSpace(lines[1]), strings.TrimSpace(lines[2]))
}

// Release gives the directory up. It is idempotent. The lock file stays:
// removing it would let a process that opened it before the removal hold
// a lock on a file nobody else can find.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	return f.Close() // closing the last descriptor releases the flock
}
