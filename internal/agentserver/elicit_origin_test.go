package agentserver

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestElicitOriginFirstHopIsOurs: forwarding an elicitation puts this
// agent's hop (its name, the server's configured name from the context)
// first, before whatever the server claimed, whatever the server wrote in
// the same _meta member; the claim is bounded in hops and in bytes, the
// server's other _meta members pass unchanged, and the server's params are
// not modified.
func TestElicitOriginFirstHopIsOurs(t *testing.T) {
	var claimed []any
	for range 20 {
		claimed = append(claimed, map[string]any{"agent": strings.Repeat("é", 100), "server": "x"})
	}
	in := &mcp.ElicitParams{Message: "hi", Meta: mcp.Meta{ElicitOriginKey: claimed, "other": "kept"}}
	ctx := context.WithValue(context.Background(), serverNameKey{}, "packrat")
	out := withOrigin(in, ElicitHop{Agent: "oracle", Server: serverName(ctx)})

	// As the next hop receives it: JSON.
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var got mcp.ElicitParams
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	hops := ElicitOrigin(got.Meta)
	if len(hops) != maxElicitHops || hops[0] != (ElicitHop{Agent: "oracle", Server: "packrat"}) {
		t.Fatalf("hops %+v: want %d, ours first", hops, maxElicitHops)
	}
	for _, h := range hops[1:] {
		if len(h.Agent) > maxElicitHopLen || !strings.HasPrefix(strings.Repeat("é", 100), h.Agent) {
			t.Errorf("claimed agent %q: want at most %d bytes of it, on a rune boundary", h.Agent, maxElicitHopLen)
		}
	}
	if got.Meta["other"] != "kept" {
		t.Errorf("other _meta: %v", got.Meta)
	}
	if !reflect.DeepEqual(in.Meta[ElicitOriginKey], claimed) {
		t.Errorf("the server's params were modified")
	}

	// A forged first hop is only a claim after ours; no server name in the
	// context is an empty one, which the person's side says it does not
	// know.
	forged := &mcp.ElicitParams{Meta: mcp.Meta{ElicitOriginKey: []any{map[string]any{"agent": "oracle", "server": "trusted"}}}}
	b, _ = json.Marshal(withOrigin(forged, ElicitHop{Agent: "oracle", Server: serverName(context.Background())}))
	var g2 mcp.ElicitParams
	if err := json.Unmarshal(b, &g2); err != nil {
		t.Fatal(err)
	}
	if hops := ElicitOrigin(g2.Meta); !reflect.DeepEqual(hops, []ElicitHop{{Agent: "oracle"}, {Agent: "oracle", Server: "trusted"}}) {
		t.Errorf("forged: %+v", hops)
	}
}
