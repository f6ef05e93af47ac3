package askcmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/agentserver"
)

// This file answers a server's elicitation/create (forwarded by the
// agents between it and ask, agent.json "elicit") by asking the person at
// the terminal: the message, then each field of the requested schema, one
// line each; an empty line takes the field's default (SEP-1034). With
// nobody to ask (stdin is not a terminal, or --no-input) the request is
// declined, so the server does nothing it wanted confirmed.
//
// The server that asks may be hostile: it can write anything in its message,
// titles, descriptions and enum values, escape sequences included, to make
// its question look like switchboard's own (a cleared screen, "[switchboard
// studio] your session expired, re-enter your SWITCHBOARD_TOKEN"). So every
// question opens with a line of ours that names who asks, from our own
// routing: the agent ask called, and the server that agent named in
// _meta (agentserver.ElicitOriginKey), never the server's text. Everything
// the server wrote is made inert (logging.Printable) and indented under a
// "│ " rule, so none of it can pass for a line of ours; and a question that
// looks like it wants a credential says so, since switchboard never asks
// for one this way.

// EnvElicitStdin, set to 1, makes ask answer elicitations from stdin even
// when it is not a terminal: for tests and scripts that feed the answers
// (the same as --answer-elicitations-from-stdin).
const EnvElicitStdin = "SWITCHBOARD_ASK_ELICIT_STDIN"

// elicitor asks the person. Elicitations are asked one at a time: two at
// once would interleave their questions on one terminal.
type elicitor struct {
	agent string // the agent ask called: who forwards every question
	in    io.Reader
	echo  bool      // stdin is not a terminal: show each answer read
	out   io.Writer // where the questions go (stderr)
	mu    sync.Mutex
	start sync.Once
	lines chan string // stdin's lines; closed at EOF
}

// newElicitor reads answers from in to the questions agent forwards.
func newElicitor(agent string, in io.Reader, out io.Writer) *elicitor {
	return &elicitor{agent: agent, in: in, echo: !isTerminal(in), out: out, lines: make(chan string)}
}

// read starts, at the first elicitation, the goroutine reading stdin's
// lines: a goroutine of its own so that an elicitation whose call ends
// stops waiting. It ends at stdin's EOF; a process that exits does not
// wait for it.
func (e *elicitor) read() {
	go func() {
		defer close(e.lines)
		sc := bufio.NewScanner(e.in)
		for sc.Scan() {
			e.lines <- sc.Text()
		}
	}()
}

// declineAll is the handler with nobody to ask: it still shows who asked
// what, framed, so that the person reading the log later knows.
func declineAll(agent string, out io.Writer) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	var mu sync.Mutex // one question's lines together
	return func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		writeFrame(out, agent, req.Params)
		fmt.Fprintln(out, "· declined (nobody to ask: stdin is not a terminal, or --no-input)")
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
}

// writeFrame writes the lines that open a question: who asks (ours), the
// credential warning when it applies (ours), then the server's message
// under the rule. A URL elicitation's URL is shown under the rule too.
func writeFrame(w io.Writer, agent string, p *mcp.ElicitParams) {
	fmt.Fprintf(w, "? %s asks you:\n", whoAsks(agent, agentserver.ElicitOrigin(p.Meta)))
	if looksLikeCredential(p) {
		fmt.Fprintln(w, "! this server asks for something that looks like a credential; Switchboard never asks for your tokens this way")
	}
	writeRuled(w, p.Message)
	if p.Mode == "url" {
		writeRuled(w, "open "+p.URL)
	}
}

// writeRuled writes text (another party's) inert, each of its lines under
// the rule.
func writeRuled(w io.Writer, text string) {
	for line := range strings.SplitSeq(shown(text), "\n") {
		fmt.Fprintf(w, "%s%s\n", rule, line)
	}
}

// rule starts every line that shows what the server wrote.
const rule = "│ "

// whoAsks names the server that asks, from the agent's word (the first
// hop, which the agent ask called wrote); hops after it are what that
// server says, and are shown as its claim.
func whoAsks(agent string, hops []agentserver.ElicitHop) string {
	if len(hops) == 0 || hops[0].Server == "" {
		return fmt.Sprintf("a server of agent %q (the agent did not say which)", shownLine(agent))
	}
	who := fmt.Sprintf("server %q of agent %q", shownLine(hops[0].Server), shownLine(agent))
	if len(hops) == 1 {
		return who
	}
	var claimed []string
	for _, h := range hops[1:] {
		server := "a server it did not name"
		if h.Server != "" {
			server = fmt.Sprintf("server %q", shownLine(h.Server))
		}
		claimed = append(claimed, fmt.Sprintf("%s of agent %q", server, shownLine(h.Agent)))
	}
	return fmt.Sprintf("%s, forwarding (it says) for %s,", who, strings.Join(claimed, ", for "))
}

// credentialWords are what a question for a secret is likely to say, in a
// field's name, title or description, or in the message.
var credentialWords = regexp.MustCompile(`(?i)token|api[\s_-]?key|password|passwd|passphrase|secret|credential|private[\s_-]?key|bearer|\bpin\b|\botp\b|one[\s-]time (?:code|password)|2fa|\bmfa\b`)

// looksLikeCredential reports whether p's message or any field's name,
// title or description speaks of a credential.
func looksLikeCredential(p *mcp.ElicitParams) bool {
	if credentialWords.MatchString(p.Message) {
		return true
	}
	schema, _ := p.RequestedSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	for name, v := range props {
		prop, _ := v.(map[string]any)
		title, _ := prop["title"].(string)
		desc, _ := prop["description"].(string)
		if credentialWords.MatchString(name + "\n" + title + "\n" + desc) {
			return true
		}
	}
	return false
}

// errEOF: stdin ended before every field was answered.
var errEOF = errors.New("stdin ended")

func (e *elicitor) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start.Do(e.read)
	p := req.Params
	writeFrame(e.out, e.agent, p)
	if p.Mode == "url" {
		fmt.Fprintln(e.out, "· declined: ask does not follow URL elicitations")
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	schema, _ := p.RequestedSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	var required []string
	if rs, ok := schema["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				required = append(required, s)
			}
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names) // a map has no order; sorted, the questions are stable
	content := map[string]any{}
	for _, name := range names {
		prop, _ := props[name].(map[string]any)
		v, err := e.field(ctx, name, prop, slices.Contains(required, name))
		if errors.Is(err, errEOF) {
			fmt.Fprintln(e.out, "· cancelled: stdin ended")
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}
		if err != nil {
			return nil, err
		}
		if v != nil {
			content[name] = v
		}
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

// field asks for one field until the answer fits its type; nil means left
// out (an optional field without a default).
func (e *elicitor) field(ctx context.Context, name string, prop map[string]any, required bool) (any, error) {
	// Everything but our own punctuation is the server's: one line each,
	// inert, so that the prompt is one line under the rule.
	typ, _ := prop["type"].(string)
	label := name
	if t, ok := prop["title"].(string); ok && t != "" {
		label = t + " (" + name + ")"
	}
	label = shownLine(label)
	hint := typ
	if typ == "boolean" {
		hint = "y/n"
	}
	if enum, ok := prop["enum"].([]any); ok {
		hint = "one of " + strings.Trim(fmt.Sprint(enum), "[]")
	}
	def, hasDef := prop["default"]
	if hasDef {
		hint += fmt.Sprintf(", default %v", def)
	} else if required {
		hint += ", required"
	}
	hint = shownLine(hint)
	desc, _ := prop["description"].(string)
	desc = shownLine(desc)
	for {
		if desc != "" {
			fmt.Fprintf(e.out, "%s%s: %s [%s]: ", rule, label, desc, hint)
		} else {
			fmt.Fprintf(e.out, "%s%s [%s]: ", rule, label, hint)
		}
		var line string
		select {
		case l, ok := <-e.lines:
			if !ok {
				fmt.Fprintln(e.out)
				return nil, errEOF
			}
			line = strings.TrimSpace(l)
			if e.echo {
				fmt.Fprintln(e.out, shownLine(line)) // a terminal has echoed it already
			}
		case <-ctx.Done():
			fmt.Fprintln(e.out)
			return nil, ctx.Err()
		}
		if line == "" {
			if hasDef {
				return def, nil
			}
			if !required {
				return nil, nil
			}
			fmt.Fprintf(e.out, "· %s is required\n", shownLine(name))
			continue
		}
		v, err := parseAnswer(typ, prop, line)
		if err != nil {
			fmt.Fprintf(e.out, "· %s\n", shownLine(err.Error()))
			continue
		}
		return v, nil
	}
}

// parseAnswer reads line as a value of the schema type typ.
func parseAnswer(typ string, prop map[string]any, line string) (any, error) {
	switch typ {
	case "boolean":
		switch strings.ToLower(line) {
		case "y", "yes", "true":
			return true, nil
		case "n", "no", "false":
			return false, nil
		}
		return nil, fmt.Errorf("answer y or n, not %q", line)
	case "integer":
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want an integer, not %q", line)
		}
		return n, nil
	case "number":
		f, err := strconv.ParseFloat(line, 64)
		if err != nil {
			return nil, fmt.Errorf("want a number, not %q", line)
		}
		return f, nil
	}
	if enum, ok := prop["enum"].([]any); ok && !slices.Contains(enum, any(line)) {
		return nil, fmt.Errorf("want one of %v, not %q", enum, line)
	}
	return line, nil
}
