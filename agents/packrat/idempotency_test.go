package packrat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
)

func render(n Note, stored bool) ([]byte, error) {
	return json.Marshal(map[string]any{"id": n.ID, "stored": stored})
}

// TestRecordCommittedWithNote: a keyed store commits the call's record in
// the note's transaction: found by Lookup afterwards, with the rendering;
// a store that fails leaves neither.
func TestRecordCommittedWithNote(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(*testing.T) *store) {
		st := open(t)
		ctx := ledger.WithCall(context.Background(), ledger.Call{Key: "k1", Tool: "store_note", Fingerprint: "fp"})
		note, stored, err := st.putRecorded(ctx, newNote{Text: "hello"}, render)
		if err != nil || !stored {
			t.Fatal(err, stored)
		}
		rec, err := st.Lookup(context.Background(), "store_note", "k1")
		if err != nil || rec == nil {
			t.Fatalf("lookup: %v %v", rec, err)
		}
		// The record in the note's row gives back exactly what store_note
		// answered.
		if want, _ := renderStore(note, true, ""); string(rec.Result) != string(want) || rec.Fingerprint != "fp" || rec.State != ledger.StateDone {
			t.Fatalf("record %+v, result %s", rec, rec.Result)
		}

		// The same key again cannot be recorded twice (the guard never asks;
		// the UNIQUE index makes sure), and the failed store leaves no note.
		if _, _, err := st.putRecorded(ctx, newNote{Text: "hello again", Tags: []string{"again"}}, render); err == nil {
			t.Fatal("a second record under one key")
		}
		if notes, _, _ := st.find(context.Background(), query{Tag: "again"}); len(notes) != 0 {
			t.Fatal("a note without its record")
		}

		// A store with its own idempotency_key keeps the record in
		// call_records; one whose record fails rolls back its note too.
		bad := ledger.WithCall(context.Background(), ledger.Call{Key: "k2", Tool: "store_note", Fingerprint: "fp"})
		boom := errors.New("boom")
		if _, _, err := st.putRecorded(bad, newNote{Text: "never", Tags: []string{"never"}, IdempotencyKey: "u2"}, func(Note, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("err %v", err)
		}
		if rec, _ := st.Lookup(context.Background(), "store_note", "k2"); rec != nil {
			t.Fatal("a record without its note")
		}
		if notes, _, _ := st.find(context.Background(), query{Tag: "never"}); len(notes) != 0 {
			t.Fatal("a note without its record")
		}

		// Deleting the note keeps the record: a resend of the store that made
		// it is still a replay, not a new note.
		if _, err := st.remove(context.Background(), note.ID); err != nil {
			t.Fatal(err)
		}
		if rec, err := st.Lookup(context.Background(), "store_note", "k1"); err != nil || rec == nil || rec.Fingerprint != "fp" {
			t.Fatalf("record after the note was deleted: %+v %v", rec, err)
		}

		// A store with its own idempotency_key records the call too.
		own := ledger.WithCall(context.Background(), ledger.Call{Key: "k3", Tool: "store_note", Fingerprint: "fp3"})
		if _, _, err := st.putRecorded(own, newNote{Text: "mine", IdempotencyKey: "user-key"}, render); err != nil {
			t.Fatal(err)
		}
		if rec, _ := st.Lookup(context.Background(), "store_note", "k3"); rec == nil || rec.Fingerprint != "fp3" {
			t.Fatalf("record of a store with its own key: %+v", rec)
		}
		if _, _, err := st.put(context.Background(), newNote{Text: "x", IdempotencyKey: callKeyPrefix + "k3"}); !errors.Is(err, errInvalid) {
			t.Fatalf("a control character in idempotency_key: %v", err)
		}
	})
}

// BenchmarkPut: a store with and without its call record, no HTTP, in
// alternating pairs (keyedPairs).
func BenchmarkPut(b *testing.B) { keyedPairs(b, false) }

// BenchmarkKeyedStore is what a key adds to store_note as the guard runs
// it: the look-up of the new key, then the store with its record, against
// the store alone (issue 25's goal: within 1.10x).
func BenchmarkKeyedStore(b *testing.B) { keyedPairs(b, true) }

// keyedPairs times a keyed store (after the guard's look-up of its new
// key, with lookup) against a plain one in alternating pairs, and reports
// the median of the pairs' ratios and their quartiles, so the spread of a
// shared machine shows.
func keyedPairs(b *testing.B, lookup bool) {
	st, err := openStore(context.Background(), filepath.Join(b.TempDir(), DBFile))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var ratios []float64
	i := 0
	put := func(keyed bool) time.Duration {
		ctx := context.Background()
		start := time.Now()
		if keyed {
			key := idempotency.NewKey(time.Now())
			if lookup {
				if rec, err := st.Lookup(ctx, "store_note", key); err != nil || rec != nil {
					b.Fatal(rec, err)
				}
			}
			ctx = ledger.WithCall(ctx, ledger.Call{Key: key, Tool: "store_note", Fingerprint: "fp"})
		}
		if _, _, err := st.putRecorded(ctx, newNote{Text: fmt.Sprintf("note %d", i)}, render); err != nil {
			b.Fatal(err)
		}
		i++
		return time.Since(start)
	}
	for b.Loop() {
		var plain, keyed time.Duration
		if i%4 == 0 {
			plain, keyed = put(false), put(true)
		} else {
			keyed, plain = put(true), put(false)
		}
		ratios = append(ratios, float64(keyed)/float64(plain))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/4], "keyed/plain-p25")
	b.ReportMetric(ratios[len(ratios)/2], "keyed/plain")
	b.ReportMetric(ratios[len(ratios)*3/4], "keyed/plain-p75")
}

// BenchmarkLookup: the guard's look-up of a key that is not recorded.
func BenchmarkLookup(b *testing.B) {
	st, err := openStore(context.Background(), filepath.Join(b.TempDir(), DBFile))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for b.Loop() {
		if rec, err := st.Lookup(context.Background(), "store_note", idempotency.NewKey(time.Now())); err != nil || rec != nil {
			b.Fatal(rec, err)
		}
	}
}

// TestRecordsEvicted: records older than the retention are dropped (the
// notes stay); newer ones are kept.
func TestRecordsEvicted(t *testing.T) {
	st := openTestStore(t, t.TempDir())
	now := time.Now()
	st.now = func() time.Time { return now.Add(-idempotency.DefaultRetention - time.Hour) }
	put := func(key string) {
		ctx := ledger.WithCall(context.Background(), ledger.Call{Key: key, Tool: "store_note", Fingerprint: "fp"})
		if _, _, err := st.putRecorded(ctx, newNote{Text: key}, render); err != nil {
			t.Fatal(err)
		}
	}
	put("old")
	st.now = func() time.Time { return now }
	for i := range recordEvery {
		put(fmt.Sprintf("new-%d", i))
	}
	if rec, _ := st.Lookup(context.Background(), "store_note", "old"); rec != nil {
		t.Fatal("a record older than the retention survived eviction")
	}
	if rec, _ := st.Lookup(context.Background(), "store_note", "new-0"); rec == nil {
		t.Fatal("a recent record was evicted")
	}
	if notes, _, _ := st.find(context.Background(), query{Terms: []string{"old"}}); len(notes) != 1 {
		t.Fatalf("the note of an evicted record: %d notes, want 1", len(notes))
	}
}
