package agentserver

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestElicitNeedsOneCaller: an elicitation from a server the agent called
// is forwarded only when the asks in flight are all one caller's; with
// none, or with several callers', it is refused (ErrNobodyToAsk) rather
// than put to someone who may not have asked. The forward itself is
// tested end to end (internal/askcmd TestE2EElicitationReachesThePerson).
func TestElicitNeedsOneCaller(t *testing.T) {
	a := newAsker(&agentdef.Definition{Name: "oracle", Elicit: true}, nil, slog.New(slog.DiscardHandler))
	req := &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "Delete 3 notes?"}}
	if _, err := a.elicit(context.Background(), req); !errors.Is(err, ErrNobodyToAsk) {
		t.Fatalf("no ask in flight: %v, want ErrNobodyToAsk", err)
	}
	// Two callers' sessions: distinct pointers are all elicit compares.
	one, two := &mcp.ServerSession{}, &mcp.ServerSession{}
	a.callers = map[*askCall]struct{}{
		{ctx: context.Background(), session: one}: {},
		{ctx: context.Background(), session: two}: {},
	}
	if _, err := a.elicit(context.Background(), req); !errors.Is(err, ErrNobodyToAsk) {
		t.Fatalf("two callers' asks in flight: %v, want ErrNobodyToAsk", err)
	}
}
