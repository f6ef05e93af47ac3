package studio

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/console"
	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// TestSignInTokenMode: in token mode a page without credentials sends the
// browser to /login; the token is exchanged there for a session cookie
// (HttpOnly, SameSite=Strict, not Secure over http) that the gate takes
// for pages and /api, only on the studio's own page: a same-site page of
// another port (SameSite does not tell ports apart) and a state change
// from another Origin are refused. Sign-out forgets the session.
func TestSignInTokenMode(t *testing.T) {
	const token = "tok-signin-test-0123456789"
	s := startStudio(t, projecttest.New(t, "abacus"), &Options{Token: token})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, body string, h map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := do("GET", "/", "", map[string]string{"Accept": "text/html"}); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login?next=%2F" {
		t.Errorf("a browser's GET / without a token: %d %q, want 303 to /login", r.StatusCode, r.Header.Get("Location"))
	}
	if r := do("GET", "/", "", nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("a program's GET / without a token: %d, want 401", r.StatusCode)
	}
	if r := do("GET", "/api/overview", "", nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/overview without a token: %d, want 401", r.StatusCode)
	}
	if r := do("GET", "/login", "", nil); r.StatusCode != http.StatusOK {
		t.Errorf("GET /login: %d", r.StatusCode)
	}
	if r := do("POST", "/login", `{"token":"wrong"}`, nil); r.StatusCode != http.StatusUnauthorized || len(r.Cookies()) != 0 {
		t.Errorf("POST /login with a wrong token: %d, cookies %v", r.StatusCode, r.Cookies())
	}
	if r := do("POST", "/login", `{"token":"`+token+`"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}); r.StatusCode != http.StatusForbidden {
		t.Errorf("POST /login from another site: %d, want 403", r.StatusCode)
	}
	r := do("POST", "/login", `{"token":"`+token+`"}`, map[string]string{"Origin": s.URL(), "Sec-Fetch-Site": "same-origin"})
	if r.StatusCode != http.StatusNoContent || len(r.Cookies()) != 1 {
		t.Fatalf("POST /login: %d, cookies %v", r.StatusCode, r.Cookies())
	}
	ck := r.Cookies()[0]
	if ck.Name != console.SessionCookie || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || len(ck.Value) != 64 || ck.MaxAge <= 0 {
		t.Errorf("the session cookie: %+v", ck)
	}
	with := func(kv ...string) map[string]string {
		h := map[string]string{"Cookie": console.SessionCookie + "=" + ck.Value}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	for _, path := range []string{"/", "/agents/abacus", "/api/overview", "/static/ask.js"} {
		if r := do("GET", path, "", with("Sec-Fetch-Site", "same-origin")); r.StatusCode != http.StatusOK {
			t.Errorf("GET %s signed in: %d", path, r.StatusCode)
		}
	}
	if r := do("GET", "/api/overview", "", with("Sec-Fetch-Site", "same-site")); r.StatusCode != http.StatusForbidden {
		t.Errorf("GET with the cookie from a same-site page: %d, want 403", r.StatusCode)
	}
	other := "http://localhost:1" // loopback, so CheckOrigin lets it by; the session does not
	if r := do("POST", "/api/agents/abacus/ask", `{"task":"x"}`, with("Origin", other)); r.StatusCode != http.StatusForbidden {
		t.Errorf("POST with the cookie from Origin %s: %d, want 403", other, r.StatusCode)
	}
	if r := do("POST", "/api/runs/no-such-run/rerun", `{}`, with("Origin", s.URL())); r.StatusCode != http.StatusNotFound {
		t.Errorf("re-run of a run never recorded: %d, want 404", r.StatusCode)
	}
	if r := do("POST", "/logout", `{}`, with("Origin", s.URL())); r.StatusCode != http.StatusNoContent {
		t.Errorf("POST /logout: %d", r.StatusCode)
	}
	if r := do("GET", "/api/overview", "", with()); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET with the cookie after sign-out: %d, want 401", r.StatusCode)
	}
}

// TestAskInBrowser does what a person does in token mode, in headless
// Chromium: opens the studio and is sent to sign in; signs in with the
// token; types a task into the fleet page's task box; watches it run (the
// delegation to abacus shows as it happens) and answer (the builtin
// model); opens its run page from the link and re-runs it there.
//
// With SWITCHBOARD_UPDATE_SCREENSHOTS set, the fleet page with the answer
// is saved as docs/studio-ask.png (docs/OBSERVABILITY.md).
func TestAskInBrowser(t *testing.T) {
	bin := findChromium(t)
	const token = "tok-browser-ask-0123456789"
	s := startStudio(t, projecttest.New(t, "oracle", "abacus"), &Options{Token: token})
	b := openBrowser(t, bin, 1280, 900)

	b.call(b.session, "Page.navigate", map[string]any{"url": s.URL() + "/"}, nil)
	b.waitFor(`location.pathname === "/login" && document.readyState === "complete" && document.body.dataset.ready === "1"`, "the sign-in page")
	b.typeText("#login-token", "not the token")
	b.click("#login-submit")
	b.waitFor(`document.getElementById("login-result").innerText.includes("not the studio's token")`, "the refusal of a wrong token")
	b.typeText("#login-token", token)
	b.click("#login-submit")
	b.waitFor(`location.pathname === "/" && document.readyState === "complete" && document.body.dataset.page === "fleet"`, "the fleet page after signing in")
	var cookieSeen string
	b.eval(`document.cookie`, &cookieSeen)
	if cookieSeen != "" {
		t.Errorf("the page's script reads cookies %q: the session cookie must be HttpOnly", cookieSeen)
	}

	b.eval(`(function(){const s=document.getElementById("ask-agent-select");s.value="oracle";s.dispatchEvent(new Event("change"));})()`, nil)
	b.waitFor(`document.getElementById("ask-model").innerText.includes("model ")`, "the chosen agent's model")
	b.typeText("#ask-task", "calculate 17 * 3")
	b.click("#ask-submit")
	b.waitFor(`document.getElementById("ask-live").dataset.done === "1"`, "the ask to end")
	if st := b.text("#ask-state"); st != "answered" {
		t.Fatalf("the ask's state %q; the page reads %s", st, b.text("#ask-live"))
	}
	if a := b.text("#ask-answer"); !strings.Contains(a, "51") {
		t.Errorf("the answer %q", a)
	}
	if evs := b.text("#ask-events"); !strings.Contains(evs, "abacus.calculate") {
		t.Errorf("the delegation to abacus is not among the events: %q", evs)
	}
	// The run is a run like any other: the fleet page lists it, live.
	b.waitFor(`[...document.querySelectorAll("#runs tbody tr[data-run]")].some(tr => tr.innerText.includes("calculate 17 * 3"))`, "the ask's run in the run list")
	shot := b.screenshot()

	var href string
	b.eval(`document.getElementById("ask-run").href`, &href)
	b.navigate(href)
	b.waitFor(`document.getElementById("task") && document.getElementById("task").innerText.includes("calculate 17 * 3")`, "the run page")
	b.click("#rerun")
	b.waitFor(`document.getElementById("ask-live") && document.getElementById("ask-live").dataset.done === "1"`, "the re-run to end")
	if a := b.text("#ask-answer"); !strings.Contains(a, "51") || b.text("#ask-state") != "answered" {
		t.Errorf("the re-run: %s", b.text("#ask-live"))
	}
	var rerunHref string
	b.eval(`document.getElementById("ask-run").href`, &rerunHref)
	if rerunHref == href {
		t.Errorf("the re-run is the same run %s: want a new one", href)
	}

	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOTS") != "" {
		if err := os.WriteFile(filepath.Join(moduleRoot, "docs", "studio-ask.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(shot) < 10000 {
		t.Errorf("screenshot: %d bytes", len(shot))
	}
}

// TestAskElicitInBrowser: a task typed on oracle's agent page (its model
// shown) makes packrat ask for confirmation (delete_notes, the builtin
// model); the question is asked in the page, under our line naming
// packrat and oracle, the server's message as text; the person ticks the
// box and answers, and the notes go.
//
// With SWITCHBOARD_UPDATE_SCREENSHOTS set, the question is saved as
// docs/studio-ask-elicit.png.
func TestAskElicitInBrowser(t *testing.T) {
	bin := findChromium(t)
	s := startStudio(t, projecttest.New(t, "oracle", "packrat", "abacus"), nil)
	for _, text := range []string{"old a", "old b", "old <b>c</b>"} {
		if res := callThroughProxy(t, s, "", "packrat", "store_note", map[string]any{"text": text, "tags": []string{"old"}}); res.IsError {
			t.Fatalf("store_note: %s", toolText(res))
		}
	}
	b := openBrowser(t, bin, 1280, 900)
	b.navigate(s.URL() + "/agents/oracle")
	b.waitPage("agent")
	if got := b.text("#ask-agent"); !strings.Contains(got, "agent oracle") || !strings.Contains(got, "model builtin") {
		t.Errorf("the ask box names %q, want agent oracle and its model", got)
	}
	b.typeText("#ask-task", "delete_notes tag=old")
	b.click("#ask-submit")
	b.waitFor(`document.querySelector("#ask-elicit form.elicit input[name=confirm]")`, "packrat's question")
	if who := b.text("#ask-elicit .who"); who != `? server "packrat" of agent "oracle" asks you:` {
		t.Errorf("who asks: %q", who)
	}
	if msg := b.text("#ask-elicit .server-text"); !strings.Contains(msg, `Delete 3 notes tagged "old"?`) {
		t.Errorf("the server's message: %q", msg)
	}
	shot := b.screenshot()
	b.click("#ask-elicit input[name=confirm]")
	b.click("#elicit-accept")
	b.waitFor(`document.getElementById("ask-live").dataset.done === "1"`, "the ask to end")
	if a := b.text("#ask-answer"); !strings.Contains(a, `Deleted 3 notes tagged "old"`) {
		t.Errorf("the answer after confirming: %q; the page reads %s", a, b.text("#ask-live"))
	}
	if evs := b.text("#ask-events"); !strings.Contains(evs, "the question was answered") {
		t.Errorf("the events: %q", evs)
	}
	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOTS") != "" {
		if err := os.WriteFile(filepath.Join(moduleRoot, "docs", "studio-ask-elicit.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
