package agentcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/agentserver"
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

// TestJournalLogFlag: a --journal-log, or a $SWITCHBOARD_JOURNAL_LOG,
// that is neither tables nor append is a usage error naming the flag, the
// value and what it may be.
func TestJournalLogFlag(t *testing.T) {
	var out bytes.Buffer
	code := serve(context.Background(), []string{"--agent", "agents/packrat", "--journal-log", "sometimes"}, nil, &out, &out)
	if code != 2 || !strings.Contains(out.String(), `--journal-log: journal log "sometimes"`) || !strings.Contains(out.String(), `"tables"`) || !strings.Contains(out.String(), `"append"`) {
		t.Fatalf("exit %d, output:\n%s\nwant 2 and the flag's error", code, out.String())
	}
	out.Reset()
	t.Setenv(agentserver.EnvJournalLog, "Append")
	code = serve(context.Background(), []string{"--agent", "agents/packrat"}, nil, &out, &out)
	if code != 2 || !strings.Contains(out.String(), `--journal-log: journal log "Append"`) {
		t.Fatalf("exit %d with %s=Append, output:\n%s\nwant 2 and the flag's error", code, agentserver.EnvJournalLog, out.String())
	}
}
