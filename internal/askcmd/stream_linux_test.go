package askcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/switchboard-run/switchboard/runtime"
)

// openPTY opens a pseudo-terminal: its master, and its slave as a
// terminal's stdout would be.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		master.Close()
		t.Skipf("naming the pseudo-terminal: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Skipf("opening the pseudo-terminal's slave: %v", err)
	}
	return master, slave
}

// TestAskStreamsOnATerminal: with nothing set, ask prints the answer as
// it comes when its stdout is a terminal (here a pseudo-terminal, whose
// line discipline turns each \n into \r\n), and once.
func TestAskStreamsOnATerminal(t *testing.T) {
	t.Setenv(EnvAskStream, "")
	master, slave := openPTY(t)
	defer master.Close()
	screen := newWatcher("The launch moved")
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return // EIO once the slave is closed
			}
		}
	}()
	url := fakeStudio(t, "oracle", func(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
		for i, d := range []runtime.AnswerDelta{{Step: 1, Text: "The launch"}, {Step: 1, Text: " moved to Friday."}} {
			if err := notifyAnswer(ctx, req, i+1, d); err != nil {
				return nil, nil, err
			}
		}
		select {
		case <-screen.seen:
		case <-time.After(testDeadline):
			return nil, nil, errors.New("the answer did not reach the terminal as it came")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "The launch moved to Friday."}}}, nil, nil
	})
	stderr := newWatcher("")
	code := Main(t.Context(), []string{"--studio", url, "when is the launch?"}, nil, slave, stderr)
	slave.Close()
	<-read
	if got := screen.String(); code != exitOK || got != "The launch moved to Friday.\r\n" {
		t.Errorf("exit %d, the terminal shows %q, want the answer once\nstderr:\n%s", code, got, stderr)
	}
}
