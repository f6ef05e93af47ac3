package askcmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file answers a server's elicitation/create (forwarded by the
// agents between it and ask, agent.json "elicit") by asking the person at
// the terminal: the message, then each field of the requested schema, one
// line each; an empty line takes the field's default (SEP-1034). With
// nobody to ask (stdin is not a terminal, or --no-input) the request is
// declined, so the server does nothing it wanted confirmed.

// EnvElicitStdin, set to 1, makes ask answer elicitations from stdin even
// when it is not a terminal: for tests and scripts that feed the answers
// (the same as --answer-elicitations-from-stdin).
const EnvElicitStdin = "SWITCHBOARD_ASK_ELICIT_STDIN"

// elicitor asks the person. Elicitations are asked one at a time: two at
// once would interleave their questions on one terminal.
type elicitor struct {
	in    io.Reader
	echo  bool      // stdin is not a terminal: show each answer read
	out   io.Writer // where the questions go (stderr)
	mu    sync.Mutex
	start sync.Once
	lines chan string // stdin's lines; closed at EOF
}

// newElicitor reads answers from in.
func newElicitor(in io.Reader, out io.Writer) *elicitor {
	return &elicitor{in: in, echo: !isTerminal(in), out: out, lines: make(chan string)}
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

// isTerminal reports whether r is a character device (a terminal).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// declineAll is the handler with nobody to ask.
func declineAll(out io.Writer) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		fmt.Fprintf(out, "· declined (nobody to ask: stdin is not a terminal, or --no-input): %s\n", req.Params.Message)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
}

// errEOF: stdin ended before every field was answered.
var errEOF = errors.New("stdin ended")

func (e *elicitor) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start.Do(e.read)
	p := req.Params
	if p.Mode == "url" {
		fmt.Fprintf(e.out, "? %s\n  open %s\n  (declined: ask does not follow URL elicitations)\n", p.Message, p.URL)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	fmt.Fprintf(e.out, "? %s\n", p.Message)
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
			fmt.Fprintln(e.out, "  (cancelled: stdin ended)")
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
	typ, _ := prop["type"].(string)
	label := name
	if t, ok := prop["title"].(string); ok && t != "" {
		label = t + " (" + name + ")"
	}
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
	desc, _ := prop["description"].(string)
	for {
		if desc != "" {
			fmt.Fprintf(e.out, "  %s: %s [%s]: ", label, desc, hint)
		} else {
			fmt.Fprintf(e.out, "  %s [%s]: ", label, hint)
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
				fmt.Fprintln(e.out, line) // a terminal has echoed it already
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
			fmt.Fprintf(e.out, "  %s is required\n", name)
			continue
		}
		v, err := parseAnswer(typ, prop, line)
		if err != nil {
			fmt.Fprintf(e.out, "  %v\n", err)
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
