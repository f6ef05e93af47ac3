package packrat

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents/internal/tooltest"
	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// serveAsking is serve with a client that answers elicitations with answer
// (nil: the client does not offer elicitation), recording the messages.
func serveAsking(t *testing.T, answer func(*mcp.ElicitRequest) (*mcp.ElicitResult, error)) (*mcp.ClientSession, *[]string) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "packrat", Version: "test"}, nil)
	closer, err := Register(server, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	opts := &mcp.ClientOptions{}
	if answer != nil {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return answer(req)
		}
	}
	cs, end := tooltest.ConnectWith(t, server, opts)
	t.Cleanup(func() {
		end()
		if err := closer.Close(); err != nil {
			t.Errorf("close packrat: %v", err)
		}
	})
	return cs, &asked
}

func tagged(t *testing.T, cs *mcp.ClientSession, tag string) int {
	t.Helper()
	var out notesOut
	tooltest.Call(t, cs, "list_notes", map[string]any{"tag": tag, "limit": maxLimit}, &out)
	return out.Count
}

func storeTagged(t *testing.T, cs *mcp.ClientSession, n int, tag string) {
	t.Helper()
	for range n {
		res := tooltest.Call(t, cs, "store_note", map[string]any{"text": "x", "tags": []string{tag}}, nil)
		if res.IsError {
			t.Fatal(mcptest.Text(res))
		}
	}
}

// TestDeleteNotesConfirmation: several notes are deleted only on an
// accepted "confirm": true; a decline, a cancel, an accept that says
// false, and a client that cannot elicit delete nothing, and are tool
// errors (the tool did not do what it was asked) saying why; one note
// goes without asking.
func TestDeleteNotesConfirmation(t *testing.T) {
	cases := []struct {
		name   string
		answer func(*mcp.ElicitRequest) (*mcp.ElicitResult, error)
		left   int
		says   string
	}{
		// A tool error whenever notes are left: nothing was deleted.
		{"accept", func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}, 0, `Deleted 3 notes tagged "old"`},
		{"accept false", func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false}}, nil
		}, 3, "not confirmed (accept)"},
		// The default is false (SEP-1034): go-sdk fills it in.
		{"accept without content", func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		}, 3, "not confirmed (accept)"},
		{"decline", func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}, 3, "not confirmed (decline)"},
		{"cancel", func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}, 3, "not confirmed (cancel)"},
		{"no elicitation", nil, 3, "cannot be asked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs, asked := serveAsking(t, c.answer)
			storeTagged(t, cs, 3, "old")
			storeTagged(t, cs, 1, "keep")
			res := tooltest.Call(t, cs, "delete_notes", map[string]any{"tag": "Old"}, nil)
			// Read even from a tool error: it says what was asked and
			// answered.
			var out deleteNotesOut
			if b, err := json.Marshal(res.StructuredContent); err != nil || json.Unmarshal(b, &out) != nil {
				t.Fatalf("delete_notes: structured content %+v: %v", res.StructuredContent, err)
			}
			if wantErr := c.left > 0; res.IsError != wantErr || !strings.Contains(mcptest.Text(res), c.says) {
				t.Fatalf("delete_notes: %q (error %v), want it to say %q (error %v)", mcptest.Text(res), res.IsError, c.says, wantErr)
			}
			if got := tagged(t, cs, "old"); got != c.left {
				t.Errorf("%d notes tagged old left, want %d", got, c.left)
			}
			if got := tagged(t, cs, "keep"); got != 1 {
				t.Errorf("the note tagged keep is gone")
			}
			if !out.Asked || len(out.Deleted) != 3-c.left || (c.answer == nil) != (out.Action == "unavailable") {
				t.Errorf("structured result %+v", out)
			}
			if c.answer != nil && (len(*asked) != 1 || (*asked)[0] != `Delete 3 notes tagged "old"? This cannot be undone.`) {
				t.Errorf("asked %q", *asked)
			}
		})
	}

	t.Run("one note, no question", func(t *testing.T) {
		cs, asked := serveAsking(t, nil)
		storeTagged(t, cs, 1, "old")
		res := tooltest.Call(t, cs, "delete_notes", map[string]any{"tag": "old"}, nil)
		if res.IsError || mcptest.Text(res) != `Deleted 1 note tagged "old".` || tagged(t, cs, "old") != 0 || len(*asked) != 0 {
			t.Fatalf("%q, asked %q", mcptest.Text(res), *asked)
		}
		res = tooltest.Call(t, cs, "delete_notes", map[string]any{"tag": "old"}, nil)
		if res.IsError || mcptest.Text(res) != `No notes tagged "old"; nothing deleted.` {
			t.Fatalf("%q", mcptest.Text(res))
		}
	})
	t.Run("blank tag", func(t *testing.T) {
		cs, _ := serveAsking(t, nil)
		wantToolError(t, tooltest.Call(t, cs, "delete_notes", map[string]any{"tag": "  "}, nil), "tag is empty")
	})
}
