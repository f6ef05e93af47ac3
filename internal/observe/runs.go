package observe

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// Runs: every tools/call the proxy forwarded, with its arguments and result,
// grouped into the runs they belong to, for the run list and the run page.
//
// A run is what one task set off: the client's ask and every delegation it
// caused, across processes. The calls are grouped by the ids they carry:
// the run id of the delegation chain (in _meta), the trace id of the
// traceparent (when tracing is on), and, for the client's own ask, the run
// id its answer names (structuredContent.run_id), which is only known when
// it ends. A call joins the group that already holds any of its ids; a
// group learning an id another group holds absorbs that group.
//
// Memory is bounded three ways: at most MaxCalls calls (a ring; the oldest
// call leaves its run, and an empty run goes), each argument or result
// kept to maxPayload bytes, and all of them together to payloadBudget,
// past which the oldest calls keep their facts but lose their payloads.
// Arguments, results and answers are redacted by the rules of the log lines
// (logging.Scrubber) before they are stored, so nothing secret is kept.
// That costs the call's caller the time to parse them once more (tens of
// microseconds for a few kilobytes), so above maxScrubbed they are not kept.

const (
	// maxScrubbed: larger arguments or results are not parsed for
	// redaction (it would cost the call's caller time), so not kept.
	maxScrubbed   = 256 << 10
	MaxCalls      = 10000
	maxPayload    = 8 << 10
	maxAnswer     = 32 << 10
	payloadBudget = 32 << 20
)

// callRecord is one call of a run. d is shared with the delegation log,
// which keeps updating its recovery; it is read under that log's lock
// (Delegations.copyOf). The rest is guarded by Runs.mu.
type callRecord struct {
	d     *studioapi.Delegation
	id    int64
	start time.Time
	depth int
	run   *runGroup

	args, result string // redacted, bounded JSON text
	text         string // the result's text, as the model reads it
	task         string // an ask's task
	answer       string // an ask's answer (structuredContent.answer or the text)
	steps        int    // an ask's model completions
	asked        bool   // task/answer/steps apply (the tool is ask)
	done         bool
	held         time.Duration // how long the studio held the call for a restarting agent
	replayed     bool          // the studio re-sent it to the agent's new process
	payload      int
	trimmed      bool // lost its payload to the budget

	// What an ask's turn reported it cost (usage.go); kept when the
	// payloads are trimmed, except stepUsage, which is counted in payload.
	usage     studioapi.Usage
	nested    studioapi.Usage
	stepUsage []studioapi.StepUsage
	reported  bool   // the result carried a usage
	turnRun   string // the run id the result names (structuredContent.run_id)

	// What an ask's turn reported of itself (calls.go): why it did not
	// answer fully, the tool calls it made (counted in payload), and
	// whether it resumed from its journal.
	reason    string
	calls     []studioapi.AgentCall
	callsLeft int
	resumed   bool
}

// runGroup is one run.
type runGroup struct {
	seq   int64
	id    string
	keys  []string
	calls []*callRecord // by id (start order)
	gone  bool          // merged into another or emptied: not in the list
}

// Runs is every recorded call grouped into runs; make it with NewRuns.
type Runs struct {
	scrub  *logging.Scrubber
	deleg  *Delegations
	budget int // payloadBudget

	mu   sync.Mutex // protects following fields
	ring []*callRecord
	next int
	runs map[string]*runGroup // by "r:"+run id, "t:"+trace id, "c:"+call id
	// openRoots are clients' asks that run and whose run is not known
	// yet, with the agent asked (see adoptLocked).
	openRoots map[*callRecord]string
	runSeq    int64
	version   int64 // bumped on every change, for pollers
	payload   int   // bytes of payload held
	// trimmedPrefix: this many calls from the oldest have lost their
	// payloads (trimLocked).
	trimmedPrefix int
	count         int         // calls in the ring
	order         []*runGroup // every run, oldest first (some gone)
	gone          int         // gone runs in order
}

// NewRuns records runs whose calls are also in deleg; what it keeps of
// them is redacted by scrub.
func NewRuns(scrub *logging.Scrubber, deleg *Delegations) *Runs {
	return newRunsSized(scrub, deleg, MaxCalls, payloadBudget)
}

// newRunsSized is NewRuns with other bounds, for tests.
func newRunsSized(scrub *logging.Scrubber, deleg *Delegations, calls, budget int) *Runs {
	return &Runs{scrub: scrub, deleg: deleg, budget: budget, ring: make([]*callRecord, calls), runs: make(map[string]*runGroup), openRoots: make(map[*callRecord]string)}
}

// Elide cuts s to at most n bytes on a rune boundary, saying how much was
// cut: what the page shows of a payload says that it is not all of it.
func Elide(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [%d bytes more not kept]", len(s)-cut)
}

func (l *Runs) bounded(raw []byte, n int) string {
	if len(raw) == 0 {
		return ""
	}
	if len(raw) > maxScrubbed {
		return fmt.Sprintf("[%d bytes: too large to keep]", len(raw))
	}
	return Elide(string(l.scrub.JSON(raw)), n)
}

// start records a call as it begins; d is its delegation-log entry.
func (l *Runs) start(d *studioapi.Delegation, o *observation) *callRecord {
	c := &callRecord{d: d, id: d.ID, start: o.start, depth: o.depth, args: l.bounded(o.args, maxPayload)}
	if o.tool == "ask" {
		var in struct {
			Task string `json:"task"`
		}
		if json.Unmarshal(o.args, &in) == nil {
			c.asked = true
			c.task = Elide(Printable(l.scrub.String(in.Task)), maxAnswer)
		}
	}
	c.payload = len(c.args) + len(c.task)
	l.mu.Lock()
	if old := l.ring[l.next]; old != nil {
		l.evictLocked(old)
		if l.trimmedPrefix > 0 {
			l.trimmedPrefix-- // the oldest left
		}
	} else {
		l.count++
	}
	l.ring[l.next] = c
	l.next = (l.next + 1) % len(l.ring)
	l.payload += c.payload
	if c.run == nil {
		l.adoptLocked(c, o)
	}
	l.joinLocked(c, o.runID, o.traceID())
	if c.asked && o.from == "" && o.runID == "" && o.traceID() == "" {
		l.openRoots[c] = o.agent
	}
	l.trimLocked()
	l.version++
	l.mu.Unlock()
	return c
}

// answer is what the observer read of a call's result for the run record.
type answer struct {
	raw  []byte // the result; nil when absent, or too large to have been kept
	size int    // its length, kept or not
	// usage is the ask's usage, when usageRead: the sniffer reads it as the
	// result passes, at any size; otherwise finishAnswer reads it from raw.
	usage     turnUsage
	usageRead bool
}

// finish completes c with the call's answer: result is the JSON-RPC result
// (nil for an error).
func (l *Runs) finish(c *callRecord, o *observation, result []byte) {
	l.finishAnswer(c, o, &answer{raw: result, size: len(result)})
}

// finishAnswer completes c with what was read of the call's result.
func (l *Runs) finishAnswer(c *callRecord, o *observation, a *answer) {
	var text, answer, turnRun, status string
	var report *turnReport
	steps := 0
	result := a.raw
	if a.size > maxScrubbed || result == nil && a.size > 0 {
		text = fmt.Sprintf("[a result of %d bytes: too large to keep]", a.size)
		answer = text
		result = nil
	} else if len(result) > 0 {
		var res struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			Structured *struct {
				Answer *string `json:"answer"`
				Steps  int     `json:"steps"`
				RunID  string  `json:"run_id"`
				Action string  `json:"action"`
				turnReport
			} `json:"structuredContent"`
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(result, &res) == nil {
			var parts []string
			for _, p := range res.Content {
				if p.Type == "text" {
					parts = append(parts, p.Text)
				}
			}
			text = strings.Join(parts, "\n")
			answer = text
			if res.Structured != nil {
				steps = res.Structured.Steps
				if res.Structured.Answer != nil {
					answer = *res.Structured.Answer
				}
				turnRun = res.Structured.RunID
				if c.asked {
					report = &res.Structured.turnReport
				} else if res.IsError {
					status = confirmStatus(res.Structured.Action)
				}
			}
		}
	}
	var calls []studioapi.AgentCall
	var callsLeft int
	var reason string
	if report != nil {
		status = report.Status
		if _, known := askBadges[status]; !known && status != studioapi.AskAnswered {
			status = "" // not a switchboard agent's word
		}
		calls, callsLeft = report.calls(l.scrub.String)
		reason = Elide(Printable(l.scrub.String(report.Reason)), maxReason)
	}
	if status != "" {
		l.deleg.setStatus(c.d, status)
	}
	cost := a.usage
	if c.asked && !a.usageRead && len(result) > 0 {
		// Apart: a usage of the wrong type (a server that is not a
		// switchboard agent) must not cost the answer.
		cost = usageOf(result)
	}
	if !c.asked {
		cost = turnUsage{}
	}
	// Redact before the lock: it is the slow part.
	keptResult := l.bounded(result, maxPayload)
	if result == nil && a.size > 0 {
		keptResult = fmt.Sprintf("[%d bytes: too large to keep]", a.size)
	}
	keptText := Elide(Printable(l.scrub.String(text)), maxPayload)
	keptAnswer := Elide(Printable(l.scrub.String(answer)), maxAnswer)
	l.mu.Lock()
	c.done = true
	delete(l.openRoots, c)
	c.held, c.replayed = o.held, o.replayed
	if !c.trimmed {
		c.result, c.text = keptResult, keptText
		if c.asked {
			c.answer = keptAnswer
			c.steps = steps
			c.stepUsage = cost.steps()
			c.calls, c.callsLeft, c.reason = calls, callsLeft, reason
			c.resumed = report != nil && report.Resumed
		}
		l.payload -= c.payload
		c.payload = len(c.args) + len(c.task) + len(c.result) + len(c.text) + len(c.answer) + stepUsageBytes(c.stepUsage) + callsBytes(c.calls) + len(c.reason)
		l.payload += c.payload
	}
	if c.asked && cost.Usage != nil {
		c.reported, c.usage, c.nested, c.turnRun = true, *cost.Usage, cost.NestedUsage, turnRun
	}
	if c.run != nil {
		l.joinLocked(c, o.runID, o.traceID())
	}
	l.trimLocked()
	l.version++
	l.mu.Unlock()
}

// adoptLocked puts a first delegation of a run (depth 1: the agent it
// comes from was called from outside the fleet) into the client's ask
// that set it off, while that ask runs and before its answer names the
// run, when there is exactly one such ask to that agent: without tracing,
// nothing else links them until the ask ends. With two or more, it waits
// for the answers to tell.
func (l *Runs) adoptLocked(c *callRecord, o *observation) {
	if o.depth != 1 || o.from == "" || o.runID == "" || l.runs["r:"+o.runID] != nil {
		return
	}
	var root *callRecord
	for r, agent := range l.openRoots {
		if agent != o.from {
			continue
		}
		if root != nil {
			return
		}
		root = r
	}
	if root != nil && root.run != nil {
		c.run = root.run
		c.run.calls = append(c.run.calls, c)
	}
}

// joinLocked puts c in the run its ids name, merging runs that turn out to
// be one.
func (l *Runs) joinLocked(c *callRecord, runID, traceID string) {
	var keys []string
	if runID != "" {
		keys = append(keys, "r:"+runID)
	}
	if traceID != "" {
		keys = append(keys, "t:"+traceID)
	}
	g := c.run
	for _, k := range keys {
		if g != nil {
			break
		}
		g = l.runs[k]
	}
	if g == nil {
		l.runSeq++
		g = &runGroup{seq: l.runSeq}
		l.order = append(l.order, g)
		switch {
		case runID != "":
			g.id = runID
		case traceID != "":
			g.id = traceID
		default:
			g.id = "call-" + strconv.FormatInt(c.id, 10)
			keys = append(keys, "c:"+strconv.FormatInt(c.id, 10))
		}
	}
	if c.run == nil {
		c.run = g
		g.calls = append(g.calls, c)
	}
	for _, k := range keys {
		switch other := l.runs[k]; {
		case other == nil:
			l.runs[k] = g
			g.keys = append(g.keys, k)
		case other != g:
			l.mergeLocked(g, other)
		}
	}
	if runID != "" && strings.HasPrefix(g.id, "call-") {
		// The client's ask learned its run id: the run is known by it now
		// (its old id still finds it).
		g.id = runID
	}
}

// mergeLocked moves every call and key of other into g.
func (l *Runs) mergeLocked(g, other *runGroup) {
	for _, c := range other.calls {
		c.run = g
	}
	g.calls = append(g.calls, other.calls...)
	slices.SortFunc(g.calls, func(a, b *callRecord) int { return int(a.id - b.id) })
	for _, k := range other.keys {
		l.runs[k] = g
	}
	g.keys = append(g.keys, other.keys...)
	// g keeps its place in the list (and its seq, which paging goes by).
	l.dropLocked(other)
	if strings.HasPrefix(g.id, "call-") && !strings.HasPrefix(other.id, "call-") {
		g.id = other.id
	}
}

// dropLocked takes g out of the run list; the list is compacted once half
// of it is gone.
func (l *Runs) dropLocked(g *runGroup) {
	if g.gone {
		return
	}
	g.gone = true
	l.gone++
	if l.gone > len(l.order)/2 {
		l.order = slices.DeleteFunc(l.order, func(g *runGroup) bool { return g.gone })
		l.gone = 0
	}
}

func (l *Runs) evictLocked(c *callRecord) {
	l.payload -= c.payload
	delete(l.openRoots, c)
	g := c.run
	if g == nil {
		return
	}
	if i := slices.Index(g.calls, c); i >= 0 {
		g.calls = slices.Delete(g.calls, i, i+1)
	}
	if len(g.calls) == 0 {
		for _, k := range g.keys {
			if l.runs[k] == g {
				delete(l.runs, k)
			}
		}
		l.dropLocked(g)
	}
}

// trimLocked drops the payloads of the oldest calls while over budget.
// The calls from the oldest up to trimmedPrefix are known trimmed, so the
// walk starts past them.
func (l *Runs) trimLocked() {
	oldest := 0 // until the ring is full, its oldest call is at 0
	if l.ring[l.next] != nil {
		oldest = l.next
	}
	for ; l.trimmedPrefix < l.count && l.payload > l.budget; l.trimmedPrefix++ {
		c := l.ring[(oldest+l.trimmedPrefix)%len(l.ring)]
		if c.trimmed {
			continue
		}
		c.trimmed = true
		l.payload -= c.payload
		// Keep what identifies the run, short.
		c.args, c.result, c.text, c.stepUsage, c.calls, c.reason = "", "", "", nil, nil, ""
		c.task, c.answer = Elide(c.task, 256), Elide(c.answer, 256)
		c.payload = len(c.task) + len(c.answer)
		l.payload += c.payload
	}
}

// RunFilter narrows the run list.
type RunFilter struct {
	Agent   string // any call of the run is to this agent
	Outcome string // "ok", "failed", "running", "recovered" or an exact outcome
	Query   string // substring of the task, case-insensitive
	Before  int64  // runs older than this sequence number (paging)
	Limit   int
}

// runView is what summaries and pages are built from: copies taken under
// both locks.
type runView struct {
	seq   int64
	id    string
	calls []callView
}

type callView struct {
	studioapi.Delegation
	rec callRecord
}

// views copies the runs (all, or those filter admits by its cheap fields)
// newest first, at most limit, and says whether there were more.
func (l *Runs) views(match func(*runGroup) bool, limit int) ([]runView, bool) {
	l.mu.Lock()
	// Newest first: l.order is in the order the runs began.
	var groups []*runGroup
	for i := len(l.order) - 1; i >= 0 && len(groups) <= limit; i-- {
		if g := l.order[i]; !g.gone && (match == nil || match(g)) {
			groups = append(groups, g)
		}
	}
	var out []runView
	more := false
	var ptrs []*studioapi.Delegation
	for _, g := range groups {
		if len(out) == limit {
			more = true
			break
		}
		v := runView{seq: g.seq, id: g.id, calls: make([]callView, len(g.calls))}
		for i, c := range g.calls {
			v.calls[i].rec = *c
			ptrs = append(ptrs, c.d)
		}
		out = append(out, v)
	}
	l.mu.Unlock()
	// The delegation log's fields under its own lock, after ours.
	copies := l.deleg.copyOf(ptrs)
	i := 0
	for _, v := range out {
		for j := range v.calls {
			v.calls[j].Delegation = copies[i]
			i++
		}
	}
	return out, more
}

// copyOf copies ds under the log's lock.
func (l *Delegations) copyOf(ds []*studioapi.Delegation) []studioapi.Delegation {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]studioapi.Delegation, len(ds))
	for i, d := range ds {
		out[i] = *d
	}
	return out
}

// Badge says truthfully how a delegation ended, as the page shows it:
// a label and its tone.
func Badge(d studioapi.Delegation) (label, tone string) { return badge(d, &callRecord{}) }

// badge says truthfully how a call ended.
func badge(d studioapi.Delegation, c *callRecord) (string, string) {
	switch {
	case d.Outcome == studioapi.OutcomeRunning:
		return "running", "run"
	case d.Recovery == studioapi.RecoveryRetried:
		// This attempt's session was gone; the pool retried: not a failure.
		return "session expired · retried", "muted"
	case d.Recovery == studioapi.RecoveryRecovered && d.Outcome == "ok":
		return "recovered", "recovered"
	case d.Outcome == "ok" && c.asked && strings.TrimSpace(c.answer) == "" && c.payload > 0:
		return "ok · no answer", "empty"
	case d.Outcome == "ok":
		return "ok", "ok"
	case d.Outcome == "tool_error" && d.Status != "":
		if b, ok := askBadges[d.Status]; ok {
			return b[0], b[1]
		}
	}
	switch d.Outcome {
	case "tool_error":
		// The tool answered, with an error in its own words (isError): a
		// refusal (bad input, a rule it keeps), not a broken hop.
		return "refused", "refused"
	case "canceled":
		return d.Outcome, "warn"
	}
	return d.Outcome, "bad"
}

// failing says whether a badge's tone is a failure of the run; refused,
// declined, not answered and unavailable are the tools' and models' own
// answers, counted apart.
func failing(tone string) bool { return tone == "bad" || tone == "warn" }

// refusing says whether a tone is a tool's or a person's no.
func refusing(tone string) bool { return tone == "refused" || tone == "declined" }

// root is the call that started the run: the first from outside the fleet,
// else the first; when its session had expired, the pool's retry of it.
func (v *runView) root() *callView {
	for i := range v.calls {
		c := &v.calls[i]
		if c.From != "" {
			continue
		}
		if c.Recovery == studioapi.RecoveryRetried {
			for j := i + 1; j < len(v.calls); j++ {
				r := &v.calls[j]
				if r.From == "" && r.Agent == c.Agent && r.Tool == c.Tool && (r.Recovery == studioapi.RecoveryRecovered || r.Recovery == studioapi.RecoveryRetrying || r.Recovery == studioapi.RecoveryFailed) {
					return r
				}
			}
		}
		return c
	}
	return &v.calls[0]
}

// tallyTone counts a call of the run, by its badge's tone, in the
// summary's failures, refusals or recoveries.
func tallyTone(s *studioapi.RunSummary, tone string) {
	switch {
	case failing(tone):
		s.Failures++
	case refusing(tone):
		s.Refused++
	case tone == "recovered":
		s.Recovered++
	}
}

func (v *runView) summary() studioapi.RunSummary {
	r := v.root()
	s := studioapi.RunSummary{ID: v.id, Task: r.rec.task, Agent: r.Agent, Tool: r.Tool, Start: r.Start, Outcome: r.Outcome, Steps: r.rec.steps}
	if s.Task == "" && !r.rec.asked {
		// Not an ask: the tool and its arguments say what was asked.
		s.Task = Elide(r.Tool+" "+r.rec.args, 200)
	}
	s.Badge, s.Tone = badge(r.Delegation, &r.rec)
	end := r.Start
	for i := range v.calls {
		c := &v.calls[i]
		if c.Start.Before(s.Start) {
			s.Start = c.Start
		}
		if e := c.Start.Add(time.Duration(c.DurationMS * float64(time.Millisecond))); e.After(end) {
			end = e
		}
		if c != r {
			s.Delegations++
		}
		_, tone := badge(c.Delegation, &c.rec)
		tallyTone(&s, tone)
	}
	// The calls the asks' turns made that the proxy did not see (to the
	// servers their tools/mcp.json names) are delegations of the run too.
	hops := v.hops(0, len(v.calls))
	markProxied(hops)
	for _, h := range hops {
		for _, c := range h.Calls {
			if c.Proxied {
				continue
			}
			s.Delegations++
			_, tone := callBadge(c)
			tallyTone(&s, tone)
		}
		s.Delegations += h.CallsLeft
	}
	for _, st := range r.rec.stepUsage {
		s.ModelMS += st.DurationMS
	}
	for _, c := range r.rec.calls {
		s.ToolMS += c.DurationMS
	}
	if r.Outcome == studioapi.OutcomeRunning {
		s.DurationMS = float64(time.Since(s.Start)) / float64(time.Millisecond)
	} else {
		s.DurationMS = float64(end.Sub(s.Start)) / float64(time.Millisecond)
	}
	if s.Outcome == "ok" && s.Delegations == 0 && s.Tone == "empty" {
		s.Badge = "did nothing"
	}
	s.Usage = v.usage()
	return s
}

func (v *runView) full(from int) studioapi.Run {
	root := v.root()
	run := studioapi.Run{RunSummary: v.summary(), Answer: root.rec.answer, StepUsage: root.rec.stepUsage, HopsFrom: from, HopsTotal: len(v.calls)}
	// Proxied is marked over every hop, not only this page's: a sibling's
	// hop may be on the next page.
	all := v.hops(0, len(v.calls))
	markProxied(all)
	end := min(len(all), from+studioapi.MaxRunHops)
	if from < end {
		run.Hops = all[from:end]
	}
	for i := range run.Hops {
		run.Hops[i].OffsetMS = float64(run.Hops[i].Start.Sub(run.Start)) / float64(time.Millisecond)
	}
	return run
}

// hops is v's calls from..to as hops (OffsetMS not set).
func (v *runView) hops(from, to int) []studioapi.Hop {
	out := make([]studioapi.Hop, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		c := &v.calls[i]
		h := studioapi.Hop{
			Delegation: c.Delegation, Depth: c.rec.depth,
			Arguments: c.rec.args, Result: c.rec.result, Text: c.rec.text,
			HeldMS: float64(c.rec.held) / float64(time.Millisecond), Replayed: c.rec.replayed,
			Usage: c.rec.usage, NestedUsage: c.rec.nested, StepUsage: c.rec.stepUsage,
			Reason: c.rec.reason, Calls: slices.Clone(c.rec.calls), CallsLeft: c.rec.callsLeft, Resumed: c.rec.resumed,
			TurnRun: c.rec.turnRun,
		}
		h.Badge, h.Tone = badge(c.Delegation, &c.rec)
		out = append(out, h)
	}
	return out
}

// List lists runs newest first.
func (l *Runs) List(f RunFilter) ([]studioapi.RunSummary, bool) {
	q := strings.ToLower(f.Query)
	match := func(g *runGroup) bool {
		if f.Before > 0 && g.seq >= f.Before {
			return false
		}
		if f.Agent != "" && !slices.ContainsFunc(g.calls, func(c *callRecord) bool { return c.d.Agent == f.Agent }) {
			return false
		}
		if q != "" && !slices.ContainsFunc(g.calls, func(c *callRecord) bool { return strings.Contains(strings.ToLower(c.task), q) }) {
			return false
		}
		return true
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	// The outcome is read from the delegation log, so it is filtered after
	// the copy; ask for more and keep paging until filled.
	var out []studioapi.RunSummary
	more := false
	before := f.Before
	for {
		views, m := l.views(func(g *runGroup) bool {
			return match(g) && (before == 0 || g.seq < before)
		}, limit)
		for i := range views {
			s := views[i].summary()
			before = views[i].seq
			if f.Outcome != "" && !outcomeMatches(f.Outcome, s) {
				continue
			}
			if len(out) == limit {
				return out, true
			}
			out = append(out, s)
		}
		if !m || f.Outcome == "" {
			more = m
			break
		}
	}
	return out, more
}

func outcomeMatches(want string, s studioapi.RunSummary) bool {
	switch want {
	case "failed":
		return failing(s.Tone) || s.Tone == "notanswered" || s.Tone == "unavailable" || s.Failures > 0
	case "recovered":
		return s.Recovered > 0
	}
	return s.Outcome == want
}

// Run returns run id with its first hops.
func (l *Runs) Run(id string) (studioapi.Run, bool) { return l.RunFrom(id, 0) }

// RunFrom returns run id with its hops from from on.
func (l *Runs) RunFrom(id string, from int) (studioapi.Run, bool) {
	l.mu.Lock()
	g := l.runs["r:"+id]
	if g == nil {
		g = l.runs["t:"+id]
	}
	if g == nil {
		if n, ok := strings.CutPrefix(id, "call-"); ok {
			g = l.runs["c:"+n]
		}
	}
	l.mu.Unlock()
	if g == nil {
		return studioapi.Run{}, false
	}
	views, _ := l.views(func(x *runGroup) bool { return x == g }, 1)
	if len(views) == 0 || len(views[0].calls) == 0 {
		return studioapi.Run{}, false
	}
	return views[0].full(max(from, 0)), true
}

// Version changes whenever a call starts or ends.
func (l *Runs) Version() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.version
}

// Page is the run list f asks for, with the version it was read at and
// the before= of the next page.
func (l *Runs) Page(f RunFilter) studioapi.RunList {
	version := l.Version()
	runs, more := l.List(f)
	list := studioapi.RunList{Runs: runs, Version: version}
	if runs == nil {
		list.Runs = []studioapi.RunSummary{}
	}
	if more && len(runs) > 0 {
		list.Next = l.seqOf(runs[len(runs)-1].ID)
	}
	return list
}

func (l *Runs) seqOf(id string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range []string{"r:" + id, "t:" + id, "c:" + strings.TrimPrefix(id, "call-")} {
		if g := l.runs[k]; g != nil {
			return g.seq
		}
	}
	return 0
}
