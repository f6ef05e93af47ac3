package studio

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// findChromium returns a headless-capable Chromium, or skips the test when
// there is none, except under CI, where a missing browser is a failure:
// .ci/run installs Debian's chromium package.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found and CI is set: .ci/run installs it (apt-get install -y chromium)")
	}
	t.Skip("chromium not found: install Debian's chromium package (apt-get install -y chromium) to run the browser test")
	return ""
}

// chromium runs headless Chromium on url with extra flags, with its own
// profile in userDir, and returns its stdout. It runs in a process group of
// its own, which is killed when it is done, so none of its helper processes
// outlive the test.
func chromium(ctx context.Context, bin, userDir, url string, extra ...string) (stdout []byte, err error) {
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--no-first-run", "--no-default-browser-check", "--no-proxy-server",
		"--user-data-dir=" + userDir,
	}
	args = append(append(args, extra...), url)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("chromium %s: %w\nstderr:\n%s", url, err, tail(stderr.String(), 4000))
	}
	return out.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestPageInBrowser loads the studio page in headless Chromium, makes a
// delegation with the real `switchboard ask` while the page is open, and
// sees it appear through the page's live update; then takes a screenshot.
//
// The page's first poll of /api/overview is held (testHookOverview) until
// the ask has finished, so "appears live" is not left to timing: the
// server-rendered page has no delegation, and the only way the dumped DOM
// can show one is the script's redraw from /api/overview. Chromium's
// --virtual-time-budget waits for pending fetches.
func TestPageInBrowser(t *testing.T) {
	bin := findChromium(t)

	firstPoll := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	testHookOverview = func() {
		once.Do(func() {
			close(firstPoll)
			<-release
		})
	}
	t.Cleanup(func() { testHookOverview = func() {} })
	var releaseOnce sync.Once
	releasePoll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releasePoll) // before the studio's Close: a held request would hold up its shutdown

	dir := mcphttptest.Project(t, "oracle", "abacus")
	s := startStudio(t, dir, nil)
	if n := len(s.Delegations(10)); n != 0 {
		t.Fatalf("%d delegations before the test made any", n)
	}

	type result struct {
		dom []byte
		err error
	}
	done := make(chan result, 1)
	profile := t.TempDir()
	go func() {
		dom, err := chromium(t.Context(), bin, profile, s.URL()+"/", "--virtual-time-budget=5000", "--dump-dom")
		done <- result{dom, err}
	}()

	select {
	case <-firstPoll:
	case r := <-done:
		t.Fatalf("chromium finished without polling /api/overview: %v; DOM:\n%s", r.err, r.dom)
	case <-time.After(60 * time.Second):
		releasePoll()
		t.Fatal("the page did not poll /api/overview within 60s")
	}

	// The page is open and waiting for its first update: delegate.
	ask := exec.CommandContext(t.Context(), switchboardBin, "ask", "--studio", s.URL(), "calculate 17 * 3")
	ask.Dir = dir
	out, err := ask.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "51") {
		releasePoll()
		t.Fatalf("switchboard ask: %v\n%s", err, out)
	}
	releasePoll()

	r := <-done // chromium's own timeout bounds this
	if r.err != nil {
		t.Fatal(r.err)
	}
	page := string(r.dom)
	for _, want := range []*regexp.Regexp{
		// The redraw from /api/overview (data-live rows are the script's).
		regexp.MustCompile(`<tr data-id="\d+" data-live="1"[^>]*><td>[0-9:]+</td><td>oracle</td><td class="name">abacus</td><td>calculate</td><td><span class="badge outcome-ok"[^>]*>ok</span></td><td class="num">[0-9.]+ m?s</td>`),
		regexp.MustCompile(`<tr data-id="\d+" data-live="1"[^>]*><td>[0-9:]+</td><td>client</td><td class="name">oracle</td><td>ask</td><td><span class="badge outcome-ok"`),
		regexp.MustCompile(`<span id="updated" data-state="live">live · updated`),
		regexp.MustCompile(`<tr data-agent="abacus"><td class="name"[^>]*>abacus</td><td><span class="badge state-running">running</span>.*calculate, convert_units, date_math`),
		regexp.MustCompile(`<tr data-process="oracle"><td class="name">oracle</td><td class="num">[1-9]`),
	} {
		if !want.MatchString(page) {
			t.Errorf("the page in the browser does not match %s\nDOM:\n%s", want, page)
		}
	}
	if t.Failed() {
		return
	}

	shot := filepath.Join(t.TempDir(), "studio.png")
	if _, err := chromium(t.Context(), bin, t.TempDir(), s.URL()+"/", "--hide-scrollbars", "--window-size=1280,760", "--virtual-time-budget=3000", "--screenshot="+shot); err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10000 {
		t.Fatalf("screenshot %s: %v, %d bytes", shot, err, len(png))
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOT") != "" {
		// For docs/OBSERVABILITY.md; refreshed by hand, never by CI.
		if err := os.WriteFile(filepath.Join(moduleRoot, "docs", "studio.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
