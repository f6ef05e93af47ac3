package agentcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestJournalSyncFlag: a --journal-sync that is neither process nor power
// is a usage error naming the flag, the value and what it may be.
func TestJournalSyncFlag(t *testing.T) {
	var out bytes.Buffer
	code := serve(context.Background(), []string{"--agent", "agents/packrat", "--journal-sync", "sometimes"}, nil, &out, &out)
	if code != 2 || !strings.Contains(out.String(), `--journal-sync: journal sync "sometimes"`) || !strings.Contains(out.String(), `"power"`) {
		t.Fatalf("exit %d, output:\n%s\nwant 2 and the flag's error", code, out.String())
	}
}
