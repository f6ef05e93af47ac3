package askcmd

import (
	"io"
	"os"

	"github.com/switchboard-run/switchboard/internal/logging"
)

// isTerminal reports whether r is a terminal: a file whose terminal
// attributes can be read (tcgetattr, as isatty(3) does). A character device
// is not enough: /dev/null is one, and taking it for a terminal made ask
// put an elicitation to nobody and read EOF (a "cancel" where nobody to ask
// should "decline"), and say it was reading the task from the terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && f != nil && isTerminalFd(f.Fd())
}

// shown is text another party wrote (a server, the agent, the model) as ask
// prints it: credentials redacted as in the logs (logging.Scrub: an
// unavailable sibling's error quotes its URL, ${VAR}s expanded), and inert
// on a terminal (logging.Printable).
func shown(s string) string { return logging.Printable(logging.Scrub(s)) }

// shownLine is shown for what must stay on one line.
func shownLine(s string) string { return logging.PrintableLine(logging.Scrub(s)) }
