package hostilesuite

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// The legitimate caller runs in a process of its own, as a user's client
// would: in the test's process its goroutines would queue behind the
// attacker's for the same two Ps, and the latency measured would be the
// test's own scheduling. It opens one session through the studio and makes
// one tools/call after another until its stdin closes, printing for each
// "<start unix ns> <duration ns> <1 ok | 0 failed>". The parent sorts the
// samples into windows by their start.

const (
	envProber      = "HOSTILE_PROBER_URL"
	envProberToken = "HOSTILE_PROBER_TOKEN" // the studio's token, if it has one
)

// runProber is the prober process's main.
func runProber(url string) int {
	c := &mcphttptest.Client{URL: url, HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}}}
	if tok := os.Getenv(envProberToken); tok != "" {
		c.Header = map[string]string{"Authorization": "Bearer " + tok}
	}
	ctx := context.Background()
	sid, err := c.Open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "prober:", err)
		return 1
	}
	// stdin: "p" pauses (the call in flight finishes, then "paused" is
	// printed), "r" resumes; EOF stops.
	stop := make(chan struct{})
	var paused sync.Mutex // held while paused, and by each call
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "p":
				paused.Lock()
				fmt.Println("paused")
			case "r":
				paused.Unlock()
			}
		}
		close(stop)
	}()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for id := 1; ; id++ {
		select {
		case <-stop:
			return 0
		default:
		}
		// Held for the call, so that a pause waits for the call in flight
		// to finish before it says "paused".
		paused.Lock()
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := c.Call(cctx, sid, id, "tools/call", map[string]any{"name": "calculate", "arguments": map[string]any{"expression": "6*7"}})
		cancel()
		took := time.Since(start)
		paused.Unlock()
		ok := 0
		if err == nil && r.Status == http.StatusOK {
			if res := r.Result(); res != nil && res["isError"] != true && strings.Contains(fmt.Sprint(res["content"]), "42") {
				ok = 1
			}
		}
		if ok == 0 {
			fmt.Fprintf(os.Stderr, "prober: call %d: %v %v\n", id, err, r)
		}
		fmt.Fprintf(out, "%d %d %d\n", start.UnixNano(), took.Nanoseconds(), ok)
		out.Flush()
	}
}

type sample struct {
	start time.Time
	took  time.Duration
	ok    bool
}

type prober struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan struct{}
	paused chan struct{} // a "paused" line was read

	mu      sync.Mutex
	samples []sample
	stderr  strings.Builder
}

func startProber(t *testing.T, url, token string) *prober {
	t.Helper()
	p := &prober{cmd: exec.Command(os.Args[0], "-test.run=^$"), done: make(chan struct{}), paused: make(chan struct{}, 1)}
	p.cmd.Env = append(os.Environ(), envProber+"="+url, envProberToken+"="+token)
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "paused" {
				p.paused <- struct{}{}
				continue
			}
			var ns, took int64
			var ok int
			if _, err := fmt.Sscan(sc.Text(), &ns, &took, &ok); err == nil {
				p.mu.Lock()
				p.samples = append(p.samples, sample{time.Unix(0, ns), time.Duration(took), ok == 1})
				p.mu.Unlock()
			}
		}
		p.cmd.Wait()
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *prober) stop() {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// pause stops the prober's calls, and returns once the one in flight has
// ended; resume starts them again.
func (p *prober) pause(t *testing.T) {
	t.Helper()
	io.WriteString(p.stdin, "p\n")
	select {
	case <-p.paused:
	case <-p.done:
		t.Fatalf("the prober exited: %s", p.errors())
	case <-time.After(60 * time.Second):
		t.Fatal("the prober did not pause within 60 s")
	}
}

func (p *prober) resume() { io.WriteString(p.stdin, "r\n") }

// count is how many calls have started since from.
func (p *prober) count(from time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i := len(p.samples) - 1; i >= 0 && !p.samples[i].start.Before(from); i-- {
		n++
	}
	return n
}

// window returns the calls that started in [from, to).
func (p *prober) window(from, to time.Time) (lat []time.Duration, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.samples {
		if s.start.Before(from) || !s.start.Before(to) {
			continue
		}
		if s.ok {
			lat = append(lat, s.took)
		} else {
			failed++
		}
	}
	return lat, failed
}

// waitCalls waits until n calls have started since from (or 60 s).
func (p *prober) waitCalls(t *testing.T, from time.Time, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.count(from) < n {
		select {
		case <-p.done:
			t.Fatalf("the prober exited: %s", p.errors())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prober made %d of %d calls in 60 s: %s", p.count(from), n, p.errors())
		}
		time.Sleep(time.Millisecond)
	}
}

func (p *prober) errors() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
