package packrat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/agents/internal/toolschema"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file declares the tools: their names, descriptions and argument
// schemas are what a coordinating model chooses by, so they say what each
// tool is for in the words a task would use (save, remember, find, recall,
// forget). Every failure a caller can cause (empty text, unknown id) comes
// back as a tool error (CallToolResult.IsError) with text the model can act
// on; only a broken server would produce a protocol error.

type storeNoteIn struct {
	Text           string   `json:"text" jsonschema:"The content to archive, verbatim. Required and not blank."`
	Title          string   `json:"title,omitempty" jsonschema:"A short title for the note (optional)."`
	Tags           []string `json:"tags,omitempty" jsonschema:"Labels to file the note under, e.g. [\"work\", \"todo\"] (optional; stored lower-case, sorted)."`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"Optional key that makes retries safe: a second call with the same key stores nothing and returns the first note's id with stored=false. Reusing a key for different content is an error. Without a key every call stores a new note."`
}

type storeNoteOut struct {
	ID        int64     `json:"id" jsonschema:"The id of the note stored under this call (or, on a repeat of an idempotency key, stored earlier)."`
	Stored    bool      `json:"stored" jsonschema:"True if this call stored a new note; false if the idempotency key was already used for this same note."`
	CreatedAt time.Time `json:"created_at" jsonschema:"When the note was stored (RFC 3339, UTC)."`
}

type searchNotesIn struct {
	Query string `json:"query" jsonschema:"Words to look for. A note matches when every word occurs in its title, text or tags (case-insensitive substring match)."`
	Tag   string `json:"tag,omitempty" jsonschema:"Only notes carrying this tag (optional)."`
	Limit int    `json:"limit,omitempty" jsonschema:"The most notes to return, newest first."`
}

type listNotesIn struct {
	Tag   string `json:"tag,omitempty" jsonschema:"Only notes carrying this tag (optional)."`
	Limit int    `json:"limit,omitempty" jsonschema:"The most notes to return, newest first."`
}

type notesOut struct {
	Notes []Note `json:"notes" jsonschema:"The notes, newest first."`
	Count int    `json:"count" jsonschema:"How many notes are returned."`
	More  bool   `json:"more" jsonschema:"True if more notes matched than limit allowed."`
}

type idIn struct {
	ID int64 `json:"id" jsonschema:"The note's numeric id, as returned by store_note, search_notes or list_notes."`
}

type deleteNotesIn struct {
	Tag string `json:"tag" jsonschema:"Delete the notes carrying this tag. Required."`
}

type deleteNotesOut struct {
	Deleted []int64 `json:"deleted" jsonschema:"The ids of the notes deleted; empty when the person did not confirm."`
	Asked   bool    `json:"asked" jsonschema:"True if the caller was asked to confirm."`
	Action  string  `json:"action,omitempty" jsonschema:"The answer to the confirmation: accept, decline, cancel, or unavailable when nobody could be asked."`
}

type deleteNoteOut struct {
	Deleted bool `json:"deleted" jsonschema:"Always true: a failed delete is a tool error."`
	Note    Note `json:"note" jsonschema:"The note as it was before deletion."`
}

// limitSchema bounds "limit" and gives it its default.
func limitSchema(props map[string]*jsonschema.Schema) {
	l := props["limit"]
	l.Minimum, l.Maximum = toolschema.Ptr(1.0), toolschema.Ptr(float64(maxLimit))
	l.Default = toolschema.RawJSON(defaultLimit)
}

func addTools(s *mcp.Server, st *store, log *slog.Logger) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "store_note",
		Title: "Store a note",
		Description: "Save (remember, record, archive) a piece of text as a note in packrat's persistent archive, " +
			"with an optional title and tags, so it can be found again later with search_notes. " +
			"Returns the note's id. Notes survive restarts. " +
			"Pass idempotency_key to make a retried call safe; without one, every call stores a new note, even a duplicate.",
		InputSchema: toolschema.For[storeNoteIn](func(p map[string]*jsonschema.Schema) {
			p["text"].MinLength, p["text"].MaxLength = toolschema.Ptr(1), toolschema.Ptr(maxTextBytes)
			p["title"].MaxLength = toolschema.Ptr(maxTitleRunes)
			p["tags"].MaxItems = toolschema.Ptr(maxTags)
			p["tags"].Items.MaxLength = toolschema.Ptr(maxTagRunes)
			p["idempotency_key"].MaxLength = toolschema.Ptr(maxKeyRunes)
		}),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: toolschema.Ptr(false), OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in storeNoteIn) (*mcp.CallToolResult, storeNoteOut, error) {
		render := func(note Note, stored bool) ([]byte, error) { return renderStore(note, stored, in.IdempotencyKey) }
		note, stored, err := st.putRecorded(ctx, newNote{Title: in.Title, Text: in.Text, Tags: in.Tags, IdempotencyKey: in.IdempotencyKey}, render)
		if errors.Is(err, errEmptyText) {
			return nil, storeNoteOut{}, fmt.Errorf("%w: pass the content to archive in \"text\"", err)
		}
		if err != nil {
			return nil, storeNoteOut{}, st.unavailable(err)
		}
		if stored {
			log.Info("note stored", "id", note.ID)
		}
		res, out := storeOutcome(note, stored, in.IdempotencyKey)
		return res, out, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:  "search_notes",
		Title: "Search notes",
		Description: "Search (find, look up, recall) notes stored in packrat's archive by words they contain. " +
			"Case-insensitive substring match; every word of the query must occur in the note's title, text or tags. " +
			"Returns the matching notes, newest first, up to limit.",
		InputSchema: toolschema.For[searchNotesIn](func(p map[string]*jsonschema.Schema) {
			p["query"].MinLength = toolschema.Ptr(1)
			limitSchema(p)
		}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in searchNotesIn) (*mcp.CallToolResult, notesOut, error) {
		terms := strings.Fields(in.Query)
		if len(terms) == 0 {
			return nil, notesOut{}, errors.New("query is empty: pass the words to look for, or use list_notes to see recent notes")
		}
		notes, more, err := st.find(ctx, query{Terms: terms, Tag: in.Tag, Limit: in.Limit})
		if err != nil {
			return nil, notesOut{}, err
		}
		return textResult(describeNotes(notes, more, fmt.Sprintf("matching %q", in.Query))), newNotesOut(notes, more), nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:  "list_notes",
		Title: "List recent notes",
		Description: "List the most recently stored notes in packrat's archive, newest first, " +
			"optionally only those carrying a tag. Use search_notes to find notes by their content.",
		InputSchema: toolschema.For[listNotesIn](limitSchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in listNotesIn) (*mcp.CallToolResult, notesOut, error) {
		notes, more, err := st.find(ctx, query{Tag: in.Tag, Limit: in.Limit})
		if err != nil {
			return nil, notesOut{}, err
		}
		what := "in the archive"
		if t := strings.TrimSpace(in.Tag); t != "" {
			what = fmt.Sprintf("tagged %q", strings.ToLower(t))
		}
		return textResult(describeNotes(notes, more, what)), newNotesOut(notes, more), nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "get_note",
		Title:       "Get a note",
		Description: "Read one note from packrat's archive by its numeric id (from store_note, search_notes or list_notes): its title, text, tags and creation time.",
		InputSchema: toolschema.For[idIn](func(p map[string]*jsonschema.Schema) { p["id"].Minimum = toolschema.Ptr(1.0) }),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, Note, error) {
		note, err := st.get(ctx, in.ID)
		if err != nil {
			return nil, Note{}, err
		}
		return textResult(describeNote(note)), note, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "delete_note",
		Title:       "Delete a note",
		Description: "Permanently delete (remove, forget) one note from packrat's archive by its numeric id. Returns the deleted note. Cannot be undone.",
		InputSchema: toolschema.For[idIn](func(p map[string]*jsonschema.Schema) { p["id"].Minimum = toolschema.Ptr(1.0) }),
		// Deleting an id twice fails the second time, but has no further
		// effect on the archive: idempotent in the spec's sense.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: toolschema.Ptr(true), IdempotentHint: true, OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, deleteNoteOut, error) {
		note, err := st.remove(ctx, in.ID)
		if err != nil {
			return nil, deleteNoteOut{}, err
		}
		log.Info("note deleted", "id", note.ID)
		return textResult(fmt.Sprintf("Deleted note %d.", note.ID)), deleteNoteOut{Deleted: true, Note: note}, nil
	})

	// A raw handler: a typed one would add structured content to the
	// input-required result, which must carry none.
	s.AddTool(&mcp.Tool{
		Name:  "delete_notes",
		Title: "Delete the notes with a tag",
		Description: "Permanently delete every note in packrat's archive carrying a tag. " +
			"More than one note is deleted only after the person confirms (the caller is asked through elicitation); " +
			"declined, or with nobody to ask, nothing is deleted. Cannot be undone.",
		InputSchema: toolschema.For[deleteNotesIn](func(p map[string]*jsonschema.Schema) {
			p["tag"].MinLength, p["tag"].MaxLength = toolschema.Ptr(1), toolschema.Ptr(maxTagRunes)
		}),
		// Not idempotent: a second call deletes notes tagged since.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: toolschema.Ptr(true), OpenWorldHint: toolschema.Ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return deleteNotes(ctx, req, st, log)
	})
}

// confirmID names delete_notes' one input request (SEP-2322).
const confirmID = "confirm"

// deleteNotes is delete_notes: one note goes without asking (as
// delete_note would), several only once the caller's person confirmed.
// Anything but an accepted "confirm": true (a decline, a cancel, a caller
// that cannot elicit) deletes nothing: a destructive act on many notes is
// never the default. And it is a tool error: the tool did not do what it
// was asked, and a success would let the caller's turn (and `switchboard
// ask`'s exit code) say the task was done; the text says why, so that a
// model reports the person's answer instead of trying again.
//
// The question is a multi round-trip input request (SEP-2322): the first
// call answers with the elicitation in InputRequests and the ids in
// RequestState; the caller asks and calls again with the answer. go-sdk
// turns that into a plain elicitation/create for a caller on an older
// protocol, and the 2026-07-28 protocol allows no other way. The state
// needs no signature: it can only name notes that still carry the tag, and
// a caller able to forge it could as well answer "confirm" itself; the
// confirmation guards the person against the model, not against their own
// client.
func deleteNotes(ctx context.Context, req *mcp.CallToolRequest, st *store, log *slog.Logger) (*mcp.CallToolResult, error) {
	var in deleteNotesIn
	if len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return toolErr("arguments: %v: pass {\"tag\": \"...\"}", err), nil
		}
	}
	tag := strings.ToLower(strings.TrimSpace(in.Tag))
	if tag == "" {
		return toolErr("tag is empty: pass the tag whose notes to delete"), nil
	}
	notes, more, err := st.find(ctx, query{Tag: tag, Limit: maxLimit})
	if err != nil {
		return nil, err
	}
	out := deleteNotesOut{Deleted: []int64{}}
	if len(notes) == 0 {
		return withOut(textResult(fmt.Sprintf("No notes tagged %q; nothing deleted.", tag)), out), nil
	}
	if len(notes) > 1 {
		out.Asked = true
		answer, answered := req.Params.InputResponses[confirmID]
		if !answered {
			if !canElicit(req) {
				out.Action = "unavailable"
				log.Info("delete_notes: nobody could confirm; nothing deleted", "tag", tag)
				return withOut(toolErr("Nothing deleted: deleting %d notes tagged %q needs confirmation, and the caller cannot be asked (it does not support elicitation).", len(notes), tag), out), nil
			}
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{confirmID: confirmation(notes, tag, more)},
				RequestState:  idState(notes),
			}, nil
		}
		res, _ := answer.(*mcp.ElicitResult)
		if res == nil {
			return toolErr("inputResponses[%q] is not an elicitation result", confirmID), nil
		}
		out.Action = res.Action
		if res.Action != "accept" || res.Content["confirm"] != true {
			return withOut(toolErr("Nothing deleted: deleting %d notes tagged %q was not confirmed (%s).", len(notes), tag, res.Action), out), nil
		}
		// Only the notes the person was asked about, of those that still
		// carry the tag.
		asked := parseIDs(req.Params.RequestState)
		notes = slices.DeleteFunc(notes, func(n Note) bool { return !asked[n.ID] })
	}
	for _, n := range notes {
		if _, err := st.remove(ctx, n.ID); err != nil {
			if errors.Is(err, errNotFound) {
				continue // deleted meanwhile: the end state is the same
			}
			return nil, fmt.Errorf("deleted %d of %d notes tagged %q: %w", len(out.Deleted), len(notes), tag, err)
		}
		out.Deleted = append(out.Deleted, n.ID)
	}
	log.Info("notes deleted", "tag", tag, "count", len(out.Deleted))
	plural := "s"
	if len(out.Deleted) == 1 {
		plural = ""
	}
	return withOut(textResult(fmt.Sprintf("Deleted %d note%s tagged %q.", len(out.Deleted), plural, tag)), out), nil
}

// confirmation is the question delete_notes asks; "confirm" defaults to
// false, so that a person who just presses enter keeps the notes.
func confirmation(notes []Note, tag string, more bool) *mcp.ElicitParams {
	msg := fmt.Sprintf("Delete %d notes tagged %q? This cannot be undone.", len(notes), tag)
	if more {
		msg = fmt.Sprintf("Delete the newest %d notes tagged %q (more carry the tag)? This cannot be undone.", len(notes), tag)
	}
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"confirm": map[string]any{"type": "boolean", "title": "Delete them", "description": fmt.Sprintf("Delete all %d notes", len(notes)), "default": false},
			},
			// Not required: a caller that leaves it out gets the
			// default (SEP-1034), false.
		},
	}
}

// canElicit reports whether the caller said it can answer an elicitation.
// A caller whose session carries no initialize parameters (the 2026-07-28
// protocol has none) is asked: it declines if it cannot answer.
func canElicit(req *mcp.CallToolRequest) bool {
	if req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	return ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation != nil
}

func idState(notes []Note) string {
	ids := make([]string, len(notes))
	for i, n := range notes {
		ids[i] = strconv.FormatInt(n.ID, 10)
	}
	return strings.Join(ids, ",")
}

// parseIDs reads idState's text; anything else names no note.
func parseIDs(state string) map[int64]bool {
	ids := make(map[int64]bool)
	for f := range strings.SplitSeq(state, ",") {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil {
			ids[id] = true
		}
	}
	return ids
}

func withOut(res *mcp.CallToolResult, out deleteNotesOut) *mcp.CallToolResult {
	res.StructuredContent = out
	return res
}

func toolErr(format string, args ...any) *mcp.CallToolResult {
	res := textResult(fmt.Sprintf(format, args...))
	res.IsError = true
	return res
}

// storeOutcome is store_note's answer: a function of the note, whether it
// was stored now, and the caller's idempotency_key, and of nothing else,
// so that the record of a keyed call can render it again (idempotency.go).
func storeOutcome(note Note, stored bool, key string) (*mcp.CallToolResult, storeNoteOut) {
	var msg string
	if stored {
		msg = fmt.Sprintf("Stored note %d.", note.ID)
	} else {
		msg = fmt.Sprintf("Note %d was already stored under idempotency key %q; nothing new was stored.", note.ID, strings.TrimSpace(key))
	}
	return textResult(msg), storeNoteOut{ID: note.ID, Stored: stored, CreatedAt: note.CreatedAt}
}

// renderStore is storeOutcome as go-sdk sends it (structured content
// beside the text), the recorded result of a keyed store_note.
func renderStore(note Note, stored bool, key string) ([]byte, error) {
	res, out := storeOutcome(note, stored, key)
	res.StructuredContent = out
	return json.Marshal(res)
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func newNotesOut(notes []Note, more bool) notesOut {
	if notes == nil {
		notes = []Note{} // "notes": [], not null
	}
	return notesOut{Notes: notes, Count: len(notes), More: more}
}

// describeNotes renders notes for a reader (the model, or a person reading
// its answer); the structured content carries the same notes as JSON.
func describeNotes(notes []Note, more bool, what string) string {
	if len(notes) == 0 {
		return fmt.Sprintf("No notes %s.", what)
	}
	var b strings.Builder
	plural := "s"
	if len(notes) == 1 {
		plural = ""
	}
	fmt.Fprintf(&b, "%d note%s %s, newest first", len(notes), plural, what)
	if more {
		b.WriteString(" (more matched; raise limit to see them)")
	}
	b.WriteString(":")
	for _, n := range notes {
		b.WriteString("\n\n")
		b.WriteString(describeNote(n))
	}
	return b.String()
}

func describeNote(n Note) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Note %d", n.ID)
	if n.Title != "" {
		fmt.Fprintf(&b, ": %s", n.Title)
	}
	fmt.Fprintf(&b, " (stored %s", n.CreatedAt.Format(time.RFC3339))
	if len(n.Tags) > 0 {
		fmt.Fprintf(&b, "; tags: %s", strings.Join(n.Tags, ", "))
	}
	b.WriteString(")\n")
	b.WriteString(n.Text)
	return b.String()
}

// unavailable turns a failed store on PostgreSQL that is not the caller's
// fault (a database lost, a connection cut) into a JSON-RPC internal error,
// which a client reads as a failed call rather than as the tool's answer,
// and which the idempotency guard does not record: a resend with the same
// key finds the note if its transaction committed before the connection
// was lost, and stores it if not. On SQLite, and for the caller's own
// mistakes, err is returned as it is (a tool error the model reads).
func (s *store) unavailable(err error) error {
	if s.pg == nil || errors.Is(err, errEmptyText) || errors.Is(err, errInvalid) || errors.Is(err, errKeyConflict) {
		return err
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
		"store_note: packrat's database failed (%v); the note was stored only if its transaction committed before that, and a resend with the same idempotency key tells which", err)}
}
