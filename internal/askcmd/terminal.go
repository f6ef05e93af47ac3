package askcmd

import (
	"io"
	"os"
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
