package packrat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents/internal/tooltest"
	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// serve registers packrat on a fresh server over dataDir and connects a
// client to it through in-memory transports. The returned stop ends the
// session and closes the database; it is also run at cleanup, so tests that
// need to restart packrat call it early.
func serve(t *testing.T, dataDir string) (cs *mcp.ClientSession, stop func()) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "packrat", Version: "test"}, nil)
	closer, err := Register(server, dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, end := tooltest.Connect(t, server)
	stop = sync.OnceFunc(func() {
		end()
		if err := closer.Close(); err != nil {
			t.Errorf("close packrat: %v", err)
		}
	})
	t.Cleanup(stop)
	return cs, stop
}

// wantToolError checks that res is a tool error (not a success) whose text
// contains every one of substrs.
func wantToolError(t *testing.T, res *mcp.CallToolResult, substrs ...string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("got success %q, want a tool error containing %q", mcptest.Text(res), substrs)
	}
	for _, s := range substrs {
		if !strings.Contains(mcptest.Text(res), s) {
			t.Errorf("tool error %q does not contain %q", mcptest.Text(res), s)
		}
	}
}

func TestToolsList(t *testing.T) {
	cs, _ := serve(t, t.TempDir())
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]map[string]any{}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var m map[string]any
		json.Unmarshal(b, &m)
		schemas[tool.Name] = m
	}
	slices.Sort(names)
	if want := []string{"delete_note", "delete_notes", "get_note", "list_notes", "search_notes", "store_note"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	// The schemas say what is required and give the limit's bounds, so a
	// model can fill them in without guessing.
	required := func(tool string) []any { r, _ := schemas[tool]["required"].([]any); return r }
	if r := required("store_note"); !slices.Equal(r, []any{"text"}) {
		t.Errorf("store_note required = %v, want [text]", r)
	}
	if r := required("search_notes"); !slices.Equal(r, []any{"query"}) {
		t.Errorf("search_notes required = %v, want [query]", r)
	}
	limit := schemas["search_notes"]["properties"].(map[string]any)["limit"].(map[string]any)
	if limit["default"] != float64(defaultLimit) || limit["maximum"] != float64(maxLimit) || limit["description"] == nil {
		t.Errorf("search_notes limit schema = %v", limit)
	}
}

func TestToolsRoundTrip(t *testing.T) {
	cs, _ := serve(t, t.TempDir())

	var stored storeNoteOut
	res := tooltest.Call(t, cs, "store_note", map[string]any{"text": "The wifi password is hunter2", "title": "Wifi", "tags": []string{"Home"}}, &stored)
	if res.IsError || !stored.Stored || stored.ID == 0 {
		t.Fatalf("store_note = %q %+v", mcptest.Text(res), stored)
	}
	if want := fmt.Sprintf("Stored note %d.", stored.ID); mcptest.Text(res) != want {
		t.Errorf("store_note text = %q, want %q", mcptest.Text(res), want)
	}

	var got Note
	res = tooltest.Call(t, cs, "get_note", map[string]any{"id": stored.ID}, &got)
	if res.IsError || got.Text != "The wifi password is hunter2" || got.Title != "Wifi" || !slices.Equal(got.Tags, []string{"home"}) {
		t.Fatalf("get_note = %q %+v", mcptest.Text(res), got)
	}
	if !strings.Contains(mcptest.Text(res), "hunter2") {
		t.Errorf("get_note text %q does not show the note", mcptest.Text(res))
	}

	var found notesOut
	res = tooltest.Call(t, cs, "search_notes", map[string]any{"query": "WIFI password"}, &found)
	if res.IsError || found.Count != 1 || found.Notes[0].ID != stored.ID || found.More {
		t.Fatalf("search_notes = %q %+v", mcptest.Text(res), found)
	}
	res = tooltest.Call(t, cs, "search_notes", map[string]any{"query": "nothing like it"}, &found)
	if res.IsError || found.Count != 0 || found.Notes == nil {
		t.Fatalf("search_notes (no match) = %q %+v; want an empty, non-nil list", mcptest.Text(res), found)
	}
	if !strings.Contains(mcptest.Text(res), "No notes") {
		t.Errorf("search_notes (no match) text = %q", mcptest.Text(res))
	}

	var listed notesOut
	res = tooltest.Call(t, cs, "list_notes", map[string]any{"tag": "home"}, &listed)
	if res.IsError || listed.Count != 1 {
		t.Fatalf("list_notes = %q %+v", mcptest.Text(res), listed)
	}

	var deleted deleteNoteOut
	res = tooltest.Call(t, cs, "delete_note", map[string]any{"id": stored.ID}, &deleted)
	if res.IsError || !deleted.Deleted || deleted.Note.ID != stored.ID {
		t.Fatalf("delete_note = %q %+v", mcptest.Text(res), deleted)
	}
	wantToolError(t, tooltest.Call(t, cs, "get_note", map[string]any{"id": stored.ID}, nil), "not found", fmt.Sprint(stored.ID))
}

func TestToolsErrors(t *testing.T) {
	cs, _ := serve(t, t.TempDir())
	tests := []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"store_note", map[string]any{"text": "   "}, []string{"empty", "text"}},
		{"store_note", map[string]any{"text": ""}, []string{"text"}},
		{"store_note", map[string]any{}, []string{"text"}},
		{"get_note", map[string]any{"id": 424242}, []string{"not found", "424242"}},
		{"delete_note", map[string]any{"id": 424242}, []string{"not found", "424242"}},
		{"get_note", map[string]any{"id": "seven"}, []string{"id"}},
		{"search_notes", map[string]any{"query": "  "}, []string{"query is empty"}},
		{"search_notes", map[string]any{"query": "x", "limit": 0}, []string{"limit"}},
		{"search_notes", map[string]any{"query": "x", "limit": maxLimit + 1}, []string{"limit"}},
		{"list_notes", map[string]any{"bogus": true}, []string{"bogus"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.tool, tt.args), func(t *testing.T) {
			res := tooltest.Call(t, cs, tt.tool, tt.args, nil)
			wantToolError(t, res, tt.want...)
			t.Logf("%s(%v) → %q", tt.tool, tt.args, mcptest.Text(res))
		})
	}
}

func TestToolsIdempotentStore(t *testing.T) {
	cs, _ := serve(t, t.TempDir())
	args := map[string]any{"text": "pay rent", "idempotency_key": "run-1/step-3"}

	// 16 concurrent calls with one key, as a retrying coordinator might
	// send: exactly one stores, all agree on the id.
	const n = 16
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		outs  [n]storeNoteOut
		ress  [n]*mcp.CallToolResult
		errs  [n]error
	)
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "store_note", Arguments: args})
			ress[i], errs[i] = res, err
			if err == nil && !res.IsError {
				b, _ := json.Marshal(res.StructuredContent)
				errs[i] = json.Unmarshal(b, &outs[i])
			}
		})
	}
	close(start)
	wg.Wait()

	newly := 0
	for i := range n {
		if errs[i] != nil || ress[i].IsError {
			t.Fatalf("call %d: err=%v result=%q", i, errs[i], mcptest.Text(ress[i]))
		}
		if outs[i].ID != outs[0].ID {
			t.Errorf("call %d: id %d, call 0: id %d", i, outs[i].ID, outs[0].ID)
		}
		if outs[i].Stored {
			newly++
		} else if !strings.Contains(mcptest.Text(ress[i]), "already stored") {
			t.Errorf("call %d: repeat text %q", i, mcptest.Text(ress[i]))
		}
	}
	if newly != 1 {
		t.Errorf("%d calls stored a note, want exactly 1", newly)
	}
	var listed notesOut
	tooltest.Call(t, cs, "list_notes", map[string]any{"limit": maxLimit}, &listed)
	if listed.Count != 1 {
		t.Errorf("archive holds %d notes, want 1", listed.Count)
	}

	// The same key with other content is refused, naming the note.
	wantToolError(t, tooltest.Call(t, cs, "store_note", map[string]any{"text": "pay rent twice", "idempotency_key": "run-1/step-3"}, nil),
		"idempotency key", fmt.Sprint(outs[0].ID))
}

func TestToolsPersistAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cs, stop := serve(t, dir)
	var stored storeNoteOut
	tooltest.Call(t, cs, "store_note", map[string]any{"text": "survives restarts", "idempotency_key": "k"}, &stored)
	stop()

	cs, _ = serve(t, dir)
	var got Note
	if res := tooltest.Call(t, cs, "get_note", map[string]any{"id": stored.ID}, &got); res.IsError || got.Text != "survives restarts" {
		t.Fatalf("after restart get_note = %q %+v", mcptest.Text(res), got)
	}
	var again storeNoteOut
	tooltest.Call(t, cs, "store_note", map[string]any{"text": "survives restarts", "idempotency_key": "k"}, &again)
	if again.Stored || again.ID != stored.ID {
		t.Errorf("repeat after restart = %+v, want id %d, stored=false", again, stored.ID)
	}
}

func TestRegisterNeedsDataDir(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "packrat", Version: "test"}, nil)
	if c, err := Register(server, "", nil); err == nil {
		c.Close()
		t.Fatal("Register with no data dir succeeded")
	}
}
