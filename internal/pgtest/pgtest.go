// Package pgtest starts a real PostgreSQL server for a test: initdb into a
// temporary directory, postgres listening on 127.0.0.1 at a port picked by
// the kernel, torn down when the test ends. It uses the Debian package's
// binaries (/usr/lib/postgresql/<major>/bin); when they are missing a
// developer's run skips the test and CI's run fails it (peertest.Missing).
//
// postgres refuses to run as root, and tests here run as root: the server
// then runs as the postgres system user (the Debian package makes it), with
// its data directory owned by that user.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-run/switchboard/internal/peertest"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// startTimeout bounds how long a start waits for the server to accept
// connections.
const startTimeout = 60 * time.Second

// A Server is one PostgreSQL server of a test.
type Server struct {
	bin     string // the directory of initdb and postgres
	dir     string // owned by the server's user: data/ and the socket
	port    int
	cred    *syscall.Credential // nil unless running as root
	durable bool

	mu   sync.Mutex // protects following
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// BinDir returns the directory of PostgreSQL's server binaries, ending t
// through peertest.Missing when there is none.
func BinDir(t testing.TB) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) == 0 {
		if p, err := exec.LookPath("postgres"); err == nil {
			found = []string{p}
		}
	}
	if len(found) == 0 {
		peertest.Missing(t, "PostgreSQL's server binaries are not installed (no /usr/lib/postgresql/*/bin/postgres): apt-get install -y postgresql")
	}
	sort.Strings(found)
	return filepath.Dir(found[len(found)-1])
}

// Start initializes and starts a server of t's own; it is stopped and its
// files removed when t ends. Tests that do not stop the server share one
// (Shared) instead: a start costs seconds.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, nil)
}

// Options configure StartWith.
type Options struct {
	// Durable keeps PostgreSQL's defaults for durability (fsync,
	// synchronous_commit, full_page_writes on), for benchmarks that compare
	// it with SQLite at synchronous=FULL. Tests run without them: faster,
	// and a test's data need not survive a power cut.
	Durable bool
}

// StartWith is Start with options; nil means the zero Options.
func StartWith(t testing.TB, o *Options) *Server {
	t.Helper()
	s := create(t)
	if o != nil {
		s.durable = o.Durable
	}
	t.Cleanup(s.remove)
	s.Restart(t)
	return s
}

var shared struct {
	mu  sync.Mutex // protects following
	srv *Server
}

// Shared returns the server the tests of this process share, starting it
// on first use. Main stops it.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		s := create(t)
		s.Restart(t)
		shared.srv = s
	}
	return shared.srv
}

// Main runs m's tests and then stops the server Shared started, if any.
// Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m interface{ Run() int }) int {
	code := m.Run()
	shared.mu.Lock()
	if shared.srv != nil {
		shared.srv.remove()
		shared.srv = nil
	}
	shared.mu.Unlock()
	return code
}

// create makes the data directory with initdb.
func create(t testing.TB) *Server {
	t.Helper()
	s := &Server{bin: BinDir(t)}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			peertest.Missing(t, "running as root, and postgres refuses to run as root, but there is no postgres user to run it as (%v): apt-get install -y postgresql", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			t.Fatal(err)
		}
	}
	initdb := exec.Command(filepath.Join(s.bin, "initdb"), "-D", s.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	return s
}

// remove stops the server and removes its files.
func (s *Server) remove() {
	s.Stop()
	os.RemoveAll(s.dir)
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// freePort returns a loopback port the kernel had free a moment ago.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Restart starts the server if it is stopped, on the same data directory
// and port, and waits until it accepts connections.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return
	}
	args := []string{"-D", s.dataDir(), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + s.dir,
		"-c", "max_connections=200", "-c", "shared_buffers=16MB"}
	if !s.durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	log, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		s.mu.Unlock()
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		s.mu.Unlock()
		t.Fatalf("pgtest: starting postgres: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	waittest.Until(t, startTimeout, "PostgreSQL to accept connections", func() bool {
		select {
		case <-done:
			out, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
			t.Fatalf("pgtest: postgres exited:\n%s", out)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			return false
		}
		c.Close(ctx)
		return true
	})
}

// Stop stops the server (fast shutdown: sessions are ended, as when a
// database goes away) and waits for it to exit. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// URL is the connection URL of database db on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Port is the server's port.
func (s *Server) Port() int { return s.port }

var databases atomic.Int64

// NewDatabase creates an empty database of t's own and returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", databases.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return s.URL(name)
}
