package faultsuite

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/proctest"
)

// The host rig of the replica rows: each replica of packrat runs in a
// network namespace of its own, a host of its own as far as the network can
// tell, joined to the test's namespace by a veth pair. The balancer (the
// real haproxy or nginx, deploy/'s examples) runs in the test's namespace
// and reaches each replica at its namespace's address; each replica reaches
// the shared PostgreSQL (internal/pgtest, on 127.0.0.1) through a TCP
// forwarder the test runs on the host side of its veth, so that a
// partition of the replica's link cuts it off from the database as well as
// from the balancer, as a partitioned host is.
//
// Addresses are 10.X.N.0/30 (host side .1, namespace side .2), X from the
// test process's pid so that two test processes on one machine do not
// collide, N one per replica; namespaces and links are named after the pid
// too, and all are deleted at cleanup.

// replicaPort is the port every replica listens on inside its namespace, as
// on a host of its own.
const replicaPort = 8080

// hostSeq numbers the namespaces of this process.
var hostSeq atomic.Int32

// A netHost is a network namespace with a veth link to the test's.
type netHost struct {
	ns     string // the namespace's name
	hostIf string // the veth end in the test's namespace
	hostIP string // its address, the namespace's way to the test's
	nsIP   string // the address inside the namespace
}

// needNetns skips t when this process may not create a network namespace
// (EPERM: not root, or in a container without CAP_SYS_ADMIN), saying so;
// any other failure fails t. It asks the kernel directly: a thread of its
// own unshares its network namespace, and is then thrown away (a locked
// thread whose goroutine exits is terminated, never reused).
func needNetns(t *testing.T) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		errc <- syscall.Unshare(syscall.CLONE_NEWNET)
	}()
	err := <-errc
	switch {
	case errors.Is(err, syscall.EPERM):
		t.Skipf("creating a network namespace is refused (unshare(CLONE_NEWNET): %v): these rows need root or CAP_SYS_ADMIN", err)
	case err != nil:
		t.Fatalf("unshare(CLONE_NEWNET): %v", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the ip command (iproute2) is not installed: %v", err)
	}
}

// ipCmd runs ip with args, failing t with its output if it fails.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v\n%s", args, err, out)
	}
}

// newNetHost creates a namespace and its link, deleted at cleanup.
func newNetHost(t *testing.T) *netHost {
	t.Helper()
	n := hostSeq.Add(1)
	if n > 250 {
		t.Fatalf("namespace %d: more than 250 in one test process, no /30 left", n)
	}
	pid := os.Getpid()
	h := &netHost{
		ns:     fmt.Sprintf("sbtest-%d-%d", pid, n),
		hostIf: fmt.Sprintf("sb%dh%d", pid%100000, n),
		hostIP: fmt.Sprintf("10.%d.%d.1", 100+pid%100, n),
		nsIP:   fmt.Sprintf("10.%d.%d.2", 100+pid%100, n),
	}
	peer := fmt.Sprintf("sb%dn%d", pid%100000, n)
	ipCmd(t, "netns", "add", h.ns)
	// Deleting the namespace deletes its veth end, and with it the pair.
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", h.ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", h.ns, err, out)
		}
	})
	ipCmd(t, "link", "add", h.hostIf, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() {
		// Gone already when the namespace went; a failure here is only
		// the pair outliving a failed namespace setup.
		exec.Command("ip", "link", "del", h.hostIf).Run()
	})
	ipCmd(t, "link", "set", peer, "netns", h.ns)
	ipCmd(t, "addr", "add", h.hostIP+"/30", "dev", h.hostIf)
	ipCmd(t, "link", "set", h.hostIf, "up")
	ipCmd(t, "-n", h.ns, "link", "set", "lo", "up")
	ipCmd(t, "-n", h.ns, "addr", "add", h.nsIP+"/30", "dev", peer)
	ipCmd(t, "-n", h.ns, "link", "set", peer, "up")
	return h
}

// partition takes the host's link down for d, then up again: every packet
// between the host and the rest (balancer, database) is dropped meanwhile,
// and the connections open across it are neither reset nor closed.
func (h *netHost) partition(t *testing.T, d time.Duration) {
	t.Helper()
	ipCmd(t, "link", "set", h.hostIf, "down")
	// The partition's length is the fault itself, not a wait for
	// something to happen.
	time.Sleep(d)
	ipCmd(t, "link", "set", h.hostIf, "up")
}

// forward listens on addr and copies every connection to target both
// ways, until t ends: the replica's way to the database, across its link.
func forward(t *testing.T, addr, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // protects conns
		conns = map[net.Conn]bool{}
	)
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return // the database is down: the replica sees the connection closed
				}
				defer up.Close()
				track(c, true)
				track(up, true)
				defer track(c, false)
				defer track(up, false)
				var pipes sync.WaitGroup
				pipes.Go(func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() })
				pipes.Go(func() { io.Copy(c, up); c.(*net.TCPConn).CloseWrite() })
				pipes.Wait()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// A nsReplica is one packrat replica on a host of its own.
type nsReplica struct {
	host *netHost
	addr string // host:port, as the balancer reaches it
	proc *proctest.Process
}

// startNSReplicas starts n packrat replicas (`switchboard agent serve
// --database`), each in a namespace of its own, on the database at pgPort
// (127.0.0.1 in the test's namespace) database db, with user and password
// as in pgURL's form "postgres://USER@HOST:PORT/DB".
func startNSReplicas(t *testing.T, n int, pgPort int, dbURL func(hostPort string) string) []*nsReplica {
	t.Helper()
	reps := make([]*nsReplica, n)
	for i := range reps {
		h := newNetHost(t)
		via := forward(t, net.JoinHostPort(h.hostIP, "0"), net.JoinHostPort("127.0.0.1", strconv.Itoa(pgPort)))
		addr := net.JoinHostPort(h.nsIP, strconv.Itoa(replicaPort))
		// ip netns exec enters the namespace and execs the command: the
		// process is the replica itself, and a signal to it reaches the
		// agent.
		p := proctest.StartProcess(t, t.TempDir(), nil, 60*time.Second, "switchboard agent ", "ip",
			"netns", "exec", h.ns, switchboardBin, "agent", "serve",
			"--agent", filepath.Join(moduleRoot, "agents", "packrat"),
			"--listen", addr, "--data-dir", t.TempDir(), "--database", dbURL(via))
		reps[i] = &nsReplica{host: h, addr: addr, proc: p}
	}
	return reps
}
