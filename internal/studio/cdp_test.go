package studio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A small Chrome DevTools Protocol client over --remote-debugging-pipe, so
// that the browser tests can act as a person: load a page, click with the
// mouse, type, wait for what appears, take a screenshot. The pipe needs no
// port and no websocket: Chromium reads commands on fd 3 and writes replies
// and events on fd 4, each a JSON message ended by a NUL byte.

type browser struct {
	t       *testing.T
	cmd     *exec.Cmd
	w       *os.File
	session string
	stderr  *syncBuf

	mu      sync.Mutex // protects nextID and pending
	nextID  int
	pending map[int]chan cdpReply
	readErr error
	done    chan struct{}
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// openBrowser starts headless Chromium with a page of width×height.
func openBrowser(t *testing.T, bin string, width, height int) *browser {
	t.Helper()
	toChrome, chromeIn, err := os.Pipe() // chromium reads fd 3
	if err != nil {
		t.Fatal(err)
	}
	chromeOut, fromChrome, err := os.Pipe() // chromium writes fd 4
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--no-first-run", "--no-default-browser-check", "--no-proxy-server",
		"--hide-scrollbars", "--remote-debugging-pipe",
		fmt.Sprintf("--window-size=%d,%d", width, height),
		"--user-data-dir="+t.TempDir(), "about:blank")
	b := &browser{t: t, cmd: cmd, w: chromeIn, stderr: &syncBuf{}, pending: map[int]chan cdpReply{}, done: make(chan struct{})}
	cmd.Stderr = b.stderr
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	go b.read(bufio.NewReader(chromeOut))
	t.Cleanup(func() {
		chromeIn.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		chromeOut.Close()
		<-b.done
	})

	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	b.call(b.session, "Page.enable", nil, nil)
	b.call(b.session, "Runtime.enable", nil, nil)
	b.call(b.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	return b
}

func (b *browser) read(r *bufio.Reader) {
	defer close(b.done)
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m struct {
			ID int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(bytes.TrimSuffix(msg, []byte{0}), &m) != nil || m.ID == 0 {
			continue // an event: the tests poll for what they wait for
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call sends one command and decodes its result into out (if not nil).
func (b *browser) call(session, method string, params, out any) {
	b.t.Helper()
	if err := b.try(session, method, params, out); err != nil {
		b.t.Fatalf("%v\nchromium stderr:\n%s", err, tail(b.stderr.String(), 3000))
	}
}

func (b *browser) try(session, method string, params, out any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return fmt.Errorf("cdp %s: the browser is gone: %w", method, b.readErr)
	}
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	if _, err := b.w.Write(append(data, 0)); err != nil {
		return fmt.Errorf("cdp %s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return fmt.Errorf("cdp %s: the browser closed the pipe", method)
		}
		if r.Error != nil {
			return fmt.Errorf("cdp %s: %d %s", method, r.Error.Code, r.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("cdp %s: no answer in 60s", method)
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into out.
func (b *browser) eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.try(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("%s: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call(b.session, "Page.navigate", map[string]any{"url": url}, nil)
	b.waitFor("document.readyState === 'complete' && location.href === "+jsString(url), "the page "+url+" to load")
}

// waitFor polls a JavaScript condition until it is true, with a deadline.
func (b *browser) waitFor(cond, what string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		var ok bool
		if last = b.eval("Boolean("+cond+")", &ok); last == nil && ok {
			return
		}
		if errors.Is(last, context.Canceled) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the browser, with the deadline above
	}
	var html string
	b.eval("document.body ? document.body.innerText : ''", &html)
	b.t.Fatalf("waiting for %s (%s): not within 30s (last error: %v); the page reads:\n%s", what, cond, last, tail(html, 4000))
}

// waitPage waits, after a click that navigates, until the page named page
// (its body's data-page) is built and live: its style sheet and script are
// in (readyState "complete"), the script has built it (data-ready: an
// agent page's forms and charts are drawn) and it has refreshed once.
// Before that, what a click aims at may still move, and a press may come
// before the script that keeps a refresh from replacing the element under
// the pointer: the click could be lost. The wait for "the fleet page" on
// its data-page alone, which is set as soon as the body is parsed, once
// let a click on an agent's link come to nothing.
func (b *browser) waitPage(page string) {
	b.t.Helper()
	b.waitFor(`document.readyState === "complete" && document.body.dataset.page === `+jsString(page)+` && document.body.dataset.ready === "1" && document.body.dataset.polls >= 1`, "the "+page+" page")
}

// click moves the mouse over the element sel names and clicks it, as a
// person does: the element must be visible and not covered.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.waitFor("document.querySelector("+jsString(sel)+")", sel+" to exist")
	var p struct{ X, Y float64 }
	js := `(function(){const e=document.querySelector(` + jsString(sel) + `);e.scrollIntoView({block:"center"});const r=e.getBoundingClientRect();return {X:r.left+Math.min(r.width/2,40),Y:r.top+r.height/2};})()`
	if err := b.eval(js, &p); err != nil {
		b.t.Fatal(err)
	}
	var hit bool
	b.eval(fmt.Sprintf(`(function(){const e=document.querySelector(%s);const h=document.elementFromPoint(%f,%f);return !!h && (e===h||e.contains(h)||h.contains(e));})()`, jsString(sel), p.X, p.Y), &hit)
	if !hit {
		b.t.Fatalf("%s is covered or not visible at (%.0f, %.0f)", sel, p.X, p.Y)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		b.call(b.session, "Input.dispatchMouseEvent", map[string]any{"type": typ, "x": p.X, "y": p.Y, "button": "left", "clickCount": 1}, nil)
	}
}

// typeText clicks into the field sel names, selects what is there and
// types text over it.
func (b *browser) typeText(sel, text string) {
	b.t.Helper()
	b.click(sel)
	b.eval(`document.activeElement.select && document.activeElement.select()`, nil)
	b.call(b.session, "Input.insertText", map[string]any{"text": text}, nil)
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	if err := b.eval(`(document.querySelector(`+jsString(sel)+`)||{}).innerText||""`, &s); err != nil {
		b.t.Fatal(err)
	}
	return s
}

func (b *browser) screenshot() []byte {
	b.t.Helper()
	var r struct {
		Data string `json:"data"`
	}
	// The whole page (up to a bound), from the top, without the flash of
	// rows that just arrived.
	b.eval(`window.scrollTo(0, 0); document.querySelectorAll("tr.new").forEach(tr => tr.classList.remove("new"))`, nil)
	var m struct {
		Size struct {
			Width, Height float64
		} `json:"cssContentSize"`
	}
	b.call(b.session, "Page.getLayoutMetrics", nil, &m)
	clip := map[string]any{"x": 0, "y": 0, "width": m.Size.Width, "height": min(m.Size.Height, 2400), "scale": 1}
	b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true, "clip": clip}, &r)
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	return png
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
