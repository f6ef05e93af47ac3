package packrat

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTestStore(t *testing.T, dir string) *store {
	t.Helper()
	st, err := openStore(context.Background(), filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func mustPut(t *testing.T, st *store, n newNote) Note {
	t.Helper()
	note, stored, err := st.put(context.Background(), n)
	if err != nil {
		t.Fatalf("put(%+v): %v", n, err)
	}
	if !stored {
		t.Fatalf("put(%+v): stored = false, want true", n)
	}
	return note
}

func TestStorePersistsAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	st := openTestStore(t, dir)
	want := mustPut(t, st, newNote{Title: "Groceries", Text: "milk, eggs\nbread", Tags: []string{"Home", "todo"}, IdempotencyKey: "k1"})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	st = openTestStore(t, dir)
	got, err := st.get(ctx, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.Title != want.Title || got.Text != want.Text ||
		!slices.Equal(got.Tags, []string{"home", "todo"}) || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("after reopen got %+v, want %+v", got, want)
	}
	// The idempotency key survives too.
	again, stored, err := st.put(ctx, newNote{Title: "Groceries", Text: "milk, eggs\nbread", Tags: []string{"todo", "home"}, IdempotencyKey: "k1"})
	if err != nil || stored || again.ID != want.ID {
		t.Errorf("repeat after reopen = (%d, %v, %v), want (%d, false, nil)", again.ID, stored, err, want.ID)
	}
}

func TestStoreIdempotencyConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(*testing.T) *store) {
		ctx := context.Background()
		st := open(t)

		const n = 16
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			ids     [n]int64
			storeds [n]bool
			errs    [n]error
		)
		for i := range n {
			wg.Go(func() {
				<-start
				note, stored, err := st.put(ctx, newNote{Text: "once", IdempotencyKey: "same-key"})
				ids[i], storeds[i], errs[i] = note.ID, stored, err
			})
		}
		close(start)
		wg.Wait()

		stored := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("put %d: %v", i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Errorf("put %d returned id %d, put 0 returned %d", i, ids[i], ids[0])
			}
			if storeds[i] {
				stored++
			}
		}
		if stored != 1 {
			t.Errorf("%d puts reported stored=true, want exactly 1", stored)
		}
		notes, _, err := st.find(ctx, query{Limit: maxLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(notes) != 1 {
			t.Errorf("archive holds %d notes, want 1", len(notes))
		}
	})
}

func TestStoreWithoutKeyStoresDuplicates(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(*testing.T) *store) {
		st := open(t)
		a := mustPut(t, st, newNote{Text: "same"})
		b := mustPut(t, st, newNote{Text: "same"})
		if a.ID == b.ID {
			t.Errorf("two keyless stores share id %d", a.ID)
		}
	})
}

func TestStoreKeyConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(*testing.T) *store) {
		ctx := context.Background()
		st := open(t)
		first := mustPut(t, st, newNote{Text: "v1", IdempotencyKey: "k"})
		_, _, err := st.put(ctx, newNote{Text: "v2", IdempotencyKey: "k"})
		if !errors.Is(err, errKeyConflict) {
			t.Fatalf("put with reused key and new text: err = %v, want errKeyConflict", err)
		}
		if !strings.Contains(err.Error(), fmt.Sprint(first.ID)) {
			t.Errorf("error %q does not name note %d", err, first.ID)
		}
		// A key is free again once its note is deleted.
		if _, err := st.remove(ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		mustPut(t, st, newNote{Text: "v2", IdempotencyKey: "k"})
	})
}

func TestStoreRejects(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(*testing.T) *store) {
		st := open(t)
		tests := []struct {
			name string
			n    newNote
			want error
		}{
			{"empty", newNote{Text: ""}, errEmptyText},
			{"blank", newNote{Text: " \n\t"}, errEmptyText},
			{"huge", newNote{Text: strings.Repeat("x", maxTextBytes+1)}, errInvalid},
			{"long title", newNote{Text: "x", Title: strings.Repeat("t", maxTitleRunes+1)}, errInvalid},
			{"too many tags", newNote{Text: "x", Tags: func() []string {
				var tags []string
				for i := range maxTags + 1 {
					tags = append(tags, fmt.Sprint("t", i))
				}
				return tags
			}()}, errInvalid},
			{"long tag", newNote{Text: "x", Tags: []string{strings.Repeat("t", maxTagRunes+1)}}, errInvalid},
			{"bad utf8", newNote{Text: "\xff"}, errInvalid},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, _, err := st.put(context.Background(), tt.n); !errors.Is(err, tt.want) {
					t.Errorf("put: err = %v, want %v", err, tt.want)
				}
			})
		}
	})
}

func TestStoreGetDelete(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(*testing.T) *store) {
		ctx := context.Background()
		st := open(t)
		a := mustPut(t, st, newNote{Text: "a"})
		deleted, err := st.remove(ctx, a.ID)
		if err != nil || deleted.Text != "a" {
			t.Fatalf("remove = (%+v, %v)", deleted, err)
		}
		if _, err := st.get(ctx, a.ID); !errors.Is(err, errNotFound) {
			t.Errorf("get deleted: err = %v, want errNotFound", err)
		}
		if _, err := st.remove(ctx, a.ID); !errors.Is(err, errNotFound) {
			t.Errorf("remove twice: err = %v, want errNotFound", err)
		}
		// AUTOINCREMENT: the deleted id is not handed out again.
		b := mustPut(t, st, newNote{Text: "b"})
		if b.ID <= a.ID {
			t.Errorf("new note got id %d, not above deleted id %d", b.ID, a.ID)
		}
	})
}

func TestStoreFind(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(*testing.T) *store) {
		ctx := context.Background()
		st := open(t)
		clock := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		st.now = func() time.Time { clock = clock.Add(time.Minute); return clock }

		milk := mustPut(t, st, newNote{Title: "Groceries", Text: "Buy MILK and eggs", Tags: []string{"home"}})
		meeting := mustPut(t, st, newNote{Title: "Standup", Text: "Discuss the milk budget", Tags: []string{"work"}})
		cafe := mustPut(t, st, newNote{Text: "Café Über opens at 8", Tags: []string{"Travel"}})
		_ = mustPut(t, st, newNote{Text: "50% off, a_b"})

		ids := func(notes []Note) []int64 {
			var out []int64
			for _, n := range notes {
				out = append(out, n.ID)
			}
			return out
		}
		tests := []struct {
			name     string
			q        query
			want     []int64
			wantMore bool
		}{
			{"case-insensitive, newest first", query{Terms: []string{"milk"}}, []int64{meeting.ID, milk.ID}, false},
			{"every term must match", query{Terms: []string{"milk", "eggs"}}, []int64{milk.ID}, false},
			{"title matches", query{Terms: []string{"groceries"}}, []int64{milk.ID}, false},
			{"tag matches as a term", query{Terms: []string{"work"}}, []int64{meeting.ID}, false},
			{"unicode folding", query{Terms: []string{"CAFÉ", "über"}}, []int64{cafe.ID}, false},
			{"LIKE wildcards are literal", query{Terms: []string{"%"}}, []int64{4}, false},
			{"underscore is literal", query{Terms: []string{"a_b"}}, []int64{4}, false},
			{"tag filter", query{Terms: []string{"milk"}, Tag: "HOME"}, []int64{milk.ID}, false},
			{"tag filter alone", query{Tag: "travel"}, []int64{cafe.ID}, false},
			{"no match", query{Terms: []string{"zebra"}}, nil, false},
			{"limit and more", query{Limit: 2}, []int64{4, cafe.ID}, true},
			{"limit exactly", query{Limit: 4}, []int64{4, cafe.ID, meeting.ID, milk.ID}, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				notes, more, err := st.find(ctx, tt.q)
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(notes); !slices.Equal(got, tt.want) || more != tt.wantMore {
					t.Errorf("find(%+v) = %v, more=%v; want %v, more=%v", tt.q, got, more, tt.want, tt.wantMore)
				}
			})
		}
	})
}

func TestStoreRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	st := openTestStore(t, dir)
	if _, err := st.db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, err := openStore(context.Background(), filepath.Join(dir, DBFile))
	if !errors.Is(err, errNewerSchema) {
		t.Fatalf("open newer schema: err = %v, want errNewerSchema", err)
	}
}

func TestStoreWALMode(t *testing.T) {
	st := openTestStore(t, t.TempDir())
	var mode string
	if err := st.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var timeout int
	if err := st.db.QueryRow("PRAGMA busy_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != int(busyTimeout.Milliseconds()) {
		t.Errorf("busy_timeout = %d, want %d", timeout, busyTimeout.Milliseconds())
	}
}
