package packrat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
)

func render(n Note, stored bool) ([]byte, error) {
	return json.Marshal(map[string]any{"id": n.ID, "stored": stored})
}

// TestRecordCommittedWithNote: a keyed store commits the call's record in
// the note's transaction: found by Lookup afterwards, with the rendering;
// a store that fails leaves neither.
func TestRecordCommittedWithNote(t *testing.T) {
	st := openTestStore(t, t.TempDir())
	ctx := idempotency.WithCall(context.Background(), idempotency.Call{Key: "k1", Tool: "store_note", Fingerprint: "fp"})
	note, stored, err := st.putRecorded(ctx, newNote{Text: "hello"}, render)
	if err != nil || !stored {
		t.Fatal(err, stored)
	}
	rec, err := st.Lookup(context.Background(), "store_note", "k1")
	if err != nil || rec == nil {
		t.Fatalf("lookup: %v %v", rec, err)
	}
	if want, _ := render(note, true); string(rec.Result) != string(want) || rec.Fingerprint != "fp" || rec.State != idempotency.StateDone {
		t.Fatalf("record %+v", rec)
	}

	// A failing store (here: its record cannot be rendered) rolls back
	// the note too.
	bad := idempotency.WithCall(context.Background(), idempotency.Call{Key: "k2", Tool: "store_note", Fingerprint: "fp"})
	boom := errors.New("boom")
	if _, _, err := st.putRecorded(bad, newNote{Text: "never", Tags: []string{"never"}}, func(Note, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if rec, _ := st.Lookup(context.Background(), "store_note", "k2"); rec != nil {
		t.Fatal("a record without its note")
	}
	if notes, _, _ := st.find(context.Background(), query{Tag: "never"}); len(notes) != 0 {
		t.Fatal("a note without its record")
	}
	// The same key again cannot be recorded twice (the guard never asks;
	// the primary key makes sure).
	if _, _, err := st.putRecorded(ctx, newNote{Text: "hello again"}, render); err == nil {
		t.Fatal("a second record under one key")
	}
}

// BenchmarkPut: a store with and without its call record, no HTTP.
func BenchmarkPut(b *testing.B) {
	st, err := openStore(context.Background(), filepath.Join(b.TempDir(), DBFile))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, keyed := range []bool{false, true} {
		b.Run(fmt.Sprintf("keyed=%v", keyed), func(b *testing.B) {
			i := 0
			for b.Loop() {
				ctx := context.Background()
				if keyed {
					ctx = idempotency.WithCall(ctx, idempotency.Call{Key: idempotency.NewKey(time.Now()), Tool: "store_note", Fingerprint: "fp"})
				}
				if _, _, err := st.putRecorded(ctx, newNote{Text: fmt.Sprintf("note %d", i)}, render); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
