package studio

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/projecttest"
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

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestConsoleInBrowser uses the studio's pages in headless Chromium as a
// person would, with the mouse and the keyboard, against a real studio
// running real agents, and real `switchboard ask`:
//
//   - with the fleet page open, an ask is made; its run appears in the run
//     list without a reload;
//   - the run is opened from the list: the task, the answer, and the
//     waterfall with the right hops (client → oracle.ask, oracle →
//     abacus.calculate); a hop is opened and its arguments read;
//   - the agent abacus is opened from the fleet page; calculate is called
//     from the form its schema made; the result shows, and the call appears
//     live in the agent's calls;
//   - abacus is restarted from its page; the restart shows in its history
//     and the agent runs again; it is stopped and started again;
//   - the run list is narrowed by the filter.
//
// With SWITCHBOARD_UPDATE_SCREENSHOTS set, the fleet, run and agent pages
// are saved to docs/ (see docs/OBSERVABILITY.md).
func TestConsoleInBrowser(t *testing.T) {
	bin := findChromium(t)
	dir := projecttest.New(t, "oracle", "abacus")
	s := startStudio(t, dir, nil)
	b := openBrowser(t, bin, 1280, 900)
	shots := map[string][]byte{}

	// The fleet page, open before anything has happened.
	b.navigate(s.URL() + "/")
	b.waitFor(`document.body.dataset.polls >= 1`, "the fleet page's first update")
	if n := b.text("#runs tbody"); !strings.Contains(n, "no runs match") {
		t.Fatalf("runs before any ask: %q", n)
	}
	b.eval(`window.__notReloaded = true`, nil)

	ask := exec.CommandContext(t.Context(), switchboardBin, "ask", "--studio", s.URL(), "calculate 17 * 3")
	ask.Dir = dir
	out, err := ask.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "51") {
		t.Fatalf("switchboard ask: %v\n%s", err, out)
	}
	b.waitFor(`[...document.querySelectorAll("#runs tbody tr[data-run]")].some(tr => tr.innerText.includes("calculate 17 * 3") && tr.innerText.includes("ok"))`, "the ask's run in the list")
	var live bool
	b.eval(`window.__notReloaded === true`, &live)
	if !live {
		t.Fatal("the page reloaded to show the run; it should have appeared live")
	}
	// A time with date and zone.
	if got := b.text("#runs tbody tr[data-run] td.time"); !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+$`).MatchString(got) {
		t.Errorf("run start %q: want a date, a time and a zone", got)
	}
	shots["studio.png"] = b.screenshot()

	// Open the run from the list.
	b.click(`#runs tbody tr[data-run] td.task a`)
	b.waitPage("run")
	if got := b.text("#task"); got != "calculate 17 * 3" {
		t.Errorf("task %q", got)
	}
	if got := b.text("#answer"); !strings.Contains(got, "51") {
		t.Errorf("answer %q, want 51 in it", got)
	}
	var hops []struct{ Agent, Tool, From, Badge string }
	if err := b.eval(`[...document.querySelectorAll("#waterfall details.hop")].map(d => ({Agent: d.dataset.agent, Tool: d.dataset.tool, From: d.querySelector(".hop-from").innerText, Badge: d.querySelector(".badge").innerText}))`, &hops); err != nil {
		t.Fatal(err)
	}
	want := []struct{ Agent, Tool, From, Badge string }{{"oracle", "ask", "client →", "ok"}, {"abacus", "calculate", "oracle →", "ok"}}
	if fmt.Sprint(hops) != fmt.Sprint(want) {
		t.Fatalf("waterfall hops %+v, want %+v", hops, want)
	}
	// Its bars: the delegation inside the ask.
	var bars []float64
	b.eval(`[...document.querySelectorAll("#waterfall details.hop rect.bar")].map(r => [+r.getAttribute("x"), +r.getAttribute("width")]).flat()`, &bars)
	if len(bars) != 4 || bars[0] != 0 || bars[2] < bars[0] || bars[2]+bars[3] > bars[0]+bars[1]+1 {
		t.Errorf("bars (x, width) %v: the calculate bar should lie within the ask's", bars)
	}
	// Open the hop's arguments.
	sel := `#waterfall details.hop[data-tool="calculate"]`
	if got := b.text(sel + " pre.args"); got != "" {
		t.Errorf("arguments shown before the hop was opened: %q", got)
	}
	b.click(sel + " > summary")
	b.waitFor(`document.querySelector(`+jsString(sel)+`).open`, "the hop to open")
	if got := b.text(sel + " pre.args"); !strings.Contains(got, `"expression"`) || !strings.Contains(got, "17") {
		t.Errorf("the hop's arguments read %q", got)
	}
	if got := b.text(sel + " pre.result"); !strings.Contains(got, "51") {
		t.Errorf("the hop's result reads %q", got)
	}
	// The ask's first model step, beside the hops: a click opens the
	// tools it chose.
	step := `#waterfall details.span-step`
	if got := b.text(step + " .span-name"); got != "model step 1" {
		t.Errorf("the first model step's span reads %q", got)
	}
	b.click(step + " > summary")
	b.waitFor(`document.querySelector(`+jsString(step)+`).open`, "the model step to open")
	if got := b.text(step + " .step-tools"); !strings.Contains(got, "calculate") {
		t.Errorf("the model step's chosen tools read %q, want the calculate tool", got)
	}
	shots["studio-run.png"] = b.screenshot()

	// The agent page, from the fleet page.
	b.click(`header a.home`)
	b.waitPage("fleet")
	b.click(`#agents tr[data-agent="abacus"] a`)
	b.waitPage("agent")
	b.eval(`window.__notReloaded = true`, nil)
	if got := b.text("#agent-state"); got != "running" {
		t.Errorf("abacus state %q", got)
	}
	b.click(`details.tool[data-tool="calculate"] > summary`)
	field := `form.tool-form[data-tool="calculate"] input[name="expression"]`
	b.waitFor(`document.querySelector(`+jsString(field)+`)`, "the calculate form")
	b.typeText(field, "6 * 7")
	callsBefore := strings.Count(b.text("#delegations tbody"), "calculate")
	b.click(`form.tool-form[data-tool="calculate"] button[type="submit"]`)
	b.waitFor(`document.querySelector('details.tool[data-tool="calculate"] .tool-result').innerText.includes("42")`, "the tool's result")
	if got := b.text(`details.tool[data-tool="calculate"] .tool-result`); strings.Contains(got, "error") {
		t.Errorf("result %q", got)
	}
	b.waitFor(fmt.Sprintf(`document.querySelector("#delegations tbody").innerText.split("calculate").length - 1 > %d`, callsBefore), "the page's call among the agent's calls, live")
	b.waitFor(`document.querySelector("#charts svg.chart")`, "the charts")
	b.eval(`window.__notReloaded === true`, &live)
	if !live {
		t.Fatal("the agent page reloaded; the call should have appeared live")
	}

	// Restart abacus from its page.
	pid := s.agents["abacus"].proc.Status().PID
	b.click(`#restart`)
	b.waitFor(`[...document.querySelectorAll("#history tbody tr.event-restarted")].some(tr => tr.innerText.includes("restart from the agent page"))`, "the restart in the history")
	b.waitFor(`document.querySelector("#agent-state").innerText === "running" && document.querySelector("#restarts").innerText === "1"`, "abacus running again")
	if now := s.agents["abacus"].proc.Status().PID; now == pid || now == 0 {
		t.Errorf("pid %d before the restart, %d after", pid, now)
	}
	// Stop it, and start it again: each button is there when it can act.
	b.waitFor(`document.querySelector("#start").disabled && !document.querySelector("#stop").disabled`, "stop enabled, start not, while running")
	b.click(`#stop`)
	b.waitFor(`document.querySelector("#agent-state").innerText === "stopped" && !document.querySelector("#start").disabled && document.querySelector("#restart").disabled`, "abacus stopped, start enabled")
	b.click(`#start`)
	b.waitFor(`document.querySelector("#agent-state").innerText === "running" && [...document.querySelectorAll("#history tbody tr")].map(tr => tr.className).join(",") === "event-started,event-stopped,event-restarted"`, "abacus running again, the history saying how")
	shots["studio-agent.png"] = b.screenshot()

	// Narrow the run list: two runs (the ask, the page's call), one with 17.
	b.navigate(s.URL() + "/")
	b.waitFor(`document.querySelectorAll("#runs tbody tr[data-run]").length === 2`, "two runs in the list")
	b.typeText(`#run-filter input[name="q"]`, "17")
	b.waitFor(`document.querySelectorAll("#runs tbody tr[data-run]").length === 1 && document.querySelector("#runs tbody").innerText.includes("calculate 17 * 3") && location.search === "?q=17"`, "the filter to narrow the list")
	b.typeText(`#run-filter input[name="q"]`, "")
	b.call(b.session, "Input.dispatchKeyEvent", map[string]any{"type": "keyDown", "key": "Backspace", "code": "Backspace", "windowsVirtualKeyCode": 8}, nil)
	b.call(b.session, "Input.dispatchKeyEvent", map[string]any{"type": "keyUp", "key": "Backspace", "code": "Backspace", "windowsVirtualKeyCode": 8}, nil)
	b.waitFor(`document.querySelectorAll("#runs tbody tr[data-run]").length === 2`, "both runs back with the filter cleared")
	choose := func(name, value string) {
		// A select's list is the browser's own window, out of the page's
		// reach: choose the way the keyboard does, and tell the form.
		b.eval(`(function(){const s=document.querySelector('#run-filter select[name="`+name+`"]');s.focus();s.value=`+jsString(value)+`;s.dispatchEvent(new Event("input",{bubbles:true}));})()`, nil)
	}
	choose("agent", "oracle")
	b.waitFor(`document.querySelectorAll("#runs tbody tr[data-run]").length === 1 && document.querySelector("#runs tbody").innerText.includes("calculate 17 * 3")`, "only oracle's run")
	choose("outcome", "failed")
	b.waitFor(`document.querySelector("#runs tbody").innerText.includes("no runs match")`, "no failed run of oracle's")

	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOTS") != "" {
		// Refreshed by hand, never by CI: the command is in docs/OBSERVABILITY.md.
		for name, png := range shots {
			if err := os.WriteFile(filepath.Join(moduleRoot, "docs", name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, png := range shots {
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10000 {
			t.Errorf("screenshot %s: %d bytes", name, len(png))
		}
	}
}
