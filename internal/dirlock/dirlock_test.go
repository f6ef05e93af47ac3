package dirlock_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/dirlock"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// TestSecondHolderRefused: a second Acquire of a held directory fails at
// once, naming the holder; after Release the directory can be taken again.
func TestSecondHolderRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := dirlock.Acquire(dir, "agent packrat")
	if err != nil {
		t.Fatal(err)
	}
	_, err = dirlock.Acquire(dir, "agent packrat")
	var held *dirlock.HeldError
	if !errors.Is(err, dirlock.ErrLocked) || !errors.As(err, &held) {
		t.Fatalf("second Acquire: %v, want ErrLocked", err)
	}
	if !strings.Contains(held.Holder, "agent packrat") || !strings.HasPrefix(held.Holder, "pid ") {
		t.Fatalf("holder %q does not name the first holder", held.Holder)
	}
	if fi, err := os.Stat(dir + "/" + dirlock.FileName); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", fi, err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal("second Release:", err)
	}
	l2, err := dirlock.Acquire(dir, "studio")
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	l2.Release()
}

// TestKilledHolderLeavesNoLock: a process holding the lock and SIGKILLed
// leaves the directory free (the kernel drops a dead process's flock).
func TestKilledHolderLeavesNoLock(t *testing.T) {
	if os.Getenv("DIRLOCK_HOLD") != "" {
		// The holder keeps its Lock reachable until it is killed: a Lock
		// dropped unreleased holds an *os.File whose finalizer closes it,
		// and with it the flock, at the next garbage collection. Under load
		// that collection can come before the parent's check below.
		l, err := dirlock.Acquire(os.Getenv("DIRLOCK_HOLD"), "holder")
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString("held\n")
		<-make(chan struct{}) // until SIGKILL
		l.Release()
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHolderLeavesNoLock$")
	cmd.Env = append(os.Environ(), "DIRLOCK_HOLD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "held\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("holder did not take the lock: %q %v", buf, err)
	}
	if _, err := dirlock.Acquire(dir, "second"); !errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("while the holder lives: %v, want ErrLocked", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	var l *dirlock.Lock
	waittest.Until(t, 5*time.Second, "the dead holder's lock to be gone", func() bool {
		l, err = dirlock.Acquire(dir, "second")
		return err == nil
	})
	l.Release()
}
