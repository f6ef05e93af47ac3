package journal

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-run/switchboard/runtime"
)

// segmentEntries counts the entries the segment of the journal at place
// holds that no fold has written into the tables (db is the journal's
// database, read behind its back).
func segmentEntries(t *testing.T, db *sql.DB, place string) int {
	t.Helper()
	data, err := os.ReadFile(place + SegmentSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	sc, err := readSegment(place+SegmentSuffix, data)
	if err != nil {
		t.Fatal(err)
	}
	var folded int64
	if err := db.QueryRow(`SELECT coalesce((SELECT value FROM journal_meta WHERE name = 'seg_folded'), 0)`).Scan(&folded); err != nil {
		t.Fatal(err)
	}
	if sc.gen == uint64(folded) {
		return 0
	}
	n := 0
	for _, o := range sc.ops {
		if o.kind == opEntry {
			n++
		}
	}
	return n
}

func openAppend(t *testing.T, place string) *Journal {
	t.Helper()
	j, err := Open(place, &Options{AppendLog: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// die ends j as the death of its process would: what was appended stays
// in the segment, unfolded.
func die(t *testing.T, j *Journal) {
	t.Helper()
	st := j.st.(*sqliteStore)
	st.segMu.Lock()
	st.dieForTest = true
	st.segMu.Unlock()
	j.Close()
}

// tableEntries counts the entries in the tables of the journal at place,
// read behind its back.
func tableEntries(t *testing.T, place string) (entries int, bytes int64) {
	t.Helper()
	db, err := sql.Open("sqlite", place)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT count(*), (SELECT coalesce(sum(bytes), 0) FROM runs) FROM entries`).Scan(&entries, &bytes); err != nil {
		t.Fatal(err)
	}
	return entries, bytes
}

// frames returns the offset and size of each whole frame of a segment.
func frames(t *testing.T, data []byte) [][2]int {
	t.Helper()
	var out [][2]int
	for off := segHeader; off+frameHead <= len(data); {
		n := int(binary.BigEndian.Uint32(data[off:]))
		if off+frameHead+n > len(data) {
			break
		}
		out = append(out, [2]int{off, frameHead + n})
		off += frameHead + n
	}
	return out
}

// journalTwoSteps begins run runID in j and journals two steps and their
// delegations, each step synced, and dies.
func journalTwoSteps(t *testing.T, place, runID string) {
	t.Helper()
	j := openAppend(t, place)
	r := begin(t, j, runID)
	record(t, r, 1)
	record(t, r, 2)
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Release()
	die(t, j)
	if n, _ := tableEntries(t, place); n != 0 {
		t.Fatalf("the tables hold %d entries before any fold, want 0 (all in the segment)", n)
	}
}

// TestSegmentTornTailIsDropped: a process that died in the middle of an
// append leaves half a frame at the end of the segment; the next Open
// drops it and folds the rest, and the run resumes from every entry whose
// Sync had returned.
func TestSegmentTornTailIsDropped(t *testing.T) {
	for _, cut := range []string{"half a frame", "zeros"} {
		t.Run(cut, func(t *testing.T) {
			place := filepath.Join(t.TempDir(), File)
			journalTwoSteps(t, place, "run-t")
			data, err := os.ReadFile(place + SegmentSuffix)
			if err != nil {
				t.Fatal(err)
			}
			tail := appendFrame(nil, op{kind: opEntry, id: 1, e: entryRow{seq: 5, kind: "step", step: 3, payload: []byte(`{"x":1}`)}})
			tail = tail[:len(tail)/2]
			if cut == "zeros" {
				tail = make([]byte, 4096) // the file grew, the bytes never came
			}
			if err := os.WriteFile(place+SegmentSuffix, append(data, tail...), 0o600); err != nil {
				t.Fatal(err)
			}
			j := openAppend(t, place)
			info, err := j.ByRunID(context.Background(), "run-t")
			if err != nil {
				t.Fatal(err)
			}
			if info.State != StateInterrupted {
				t.Errorf("state %s, want interrupted", info.State)
			}
			r, err := j.Resume(context.Background(), info.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if rp := r.Replay(); len(rp.Steps) != 2 || len(rp.Delegations) != 2 {
				t.Errorf("replay %d steps, %d delegations; want 2 and 2", len(rp.Steps), len(rp.Delegations))
			}
			if fi, err := os.Stat(place + SegmentSuffix); err != nil || fi.Size() != int64(segHeader) {
				t.Errorf("segment after the fold: %v, %v; want a header alone", fi, err)
			}
		})
	}
}

// TestSegmentCorruptMiddleBreaksItsRun: a frame in the middle that does
// not match its CRC marks its run broken (never resumed from a state with
// a hole in it); the other runs of the segment are folded and resume. A
// frame whose length is damaged, after which nothing parses, fails Open
// naming the file and offset, rather than drop what follows unseen.
func TestSegmentCorruptMiddleBreaksItsRun(t *testing.T) {
	place := filepath.Join(t.TempDir(), File)
	j := openAppend(t, place)
	bad, good := begin(t, j, "run-bad"), begin(t, j, "run-good")
	for _, r := range []*Run{bad, good} {
		record(t, r, 1)
		if err := r.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	die(t, j)
	data, err := os.ReadFile(place + SegmentSuffix)
	if err != nil {
		t.Fatal(err)
	}
	fs := frames(t, data)
	var target [2]int
	for _, f := range fs {
		o, _ := decodeFrame(data[f[0]+frameHead : f[0]+f[1]])
		if o.id == bad.info.ID && o.kind == opEntry && o.e.seq == 1 {
			target = f
		}
	}
	if target[1] == 0 || target == fs[len(fs)-1] {
		t.Fatalf("no middle frame of run-bad's first entry among %v", fs)
	}
	damaged := append([]byte(nil), data...)
	damaged[target[0]+target[1]-1] ^= 0x55 // the last byte of its body
	if err := os.WriteFile(place+SegmentSuffix, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	j = openAppend(t, place)
	ctx := context.Background()
	info, err := j.ByRunID(ctx, "run-bad")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StateBroken || !strings.Contains(info.Error, "CRC") {
		t.Errorf("run-bad: %s (%q), want broken, naming the CRC", info.State, info.Error)
	}
	if _, err := j.Resume(ctx, info.ID); !errors.Is(err, ErrNotResumable) {
		t.Errorf("resume of run-bad: %v, want ErrNotResumable", err)
	}
	gi, err := j.ByRunID(ctx, "run-good")
	if err != nil {
		t.Fatal(err)
	}
	r, err := j.Resume(ctx, gi.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rp := r.Replay(); len(rp.Steps) != 1 || len(rp.Delegations) != 1 {
		t.Errorf("run-good replays %d steps, %d delegations; want 1 and 1", len(rp.Steps), len(rp.Delegations))
	}
	r.Release()
	j.Close()

	// A length damaged: what follows cannot be found.
	place2 := filepath.Join(t.TempDir(), File)
	journalTwoSteps(t, place2, "run-len")
	data, err = os.ReadFile(place2 + SegmentSuffix)
	if err != nil {
		t.Fatal(err)
	}
	f := frames(t, data)[1]
	binary.BigEndian.PutUint32(data[f[0]:], uint32(f[1]-frameHead+3))
	if err := os.WriteFile(place2+SegmentSuffix, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(place2, &Options{AppendLog: true})
	if !errors.Is(err, errSegment) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", f[0])) || !strings.Contains(err.Error(), place2+SegmentSuffix) {
		t.Errorf("Open with a damaged length: %v, want errSegment naming the file and offset %d", err, f[0])
	}
}

// TestSegmentFoldOnOpen: what a dead process appended is folded by the
// next Open, with AppendLog or without (then the segment is removed), and
// a segment whose generation was folded (the process died between the
// fold's commit and emptying the segment) is not folded again: a run's
// bytes are not counted twice.
func TestSegmentFoldOnOpen(t *testing.T) {
	for _, appendLog := range []bool{true, false} {
		t.Run(fmt.Sprint("AppendLog=", appendLog), func(t *testing.T) {
			place := filepath.Join(t.TempDir(), File)
			journalTwoSteps(t, place, "run-f")
			unfolded, err := os.ReadFile(place + SegmentSuffix)
			if err != nil {
				t.Fatal(err)
			}
			j, err := Open(place, &Options{AppendLog: appendLog})
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			entries, bytes := tableEntries(t, place)
			if entries != 4 || bytes == 0 {
				t.Fatalf("after the fold on Open the tables hold %d entries, %d bytes; want 4 entries", entries, bytes)
			}
			_, err = os.Stat(place + SegmentSuffix)
			if appendLog == errors.Is(err, os.ErrNotExist) {
				t.Errorf("segment after an Open with AppendLog=%v: %v", appendLog, err)
			}
			// The folded generation back in place, as if the truncation
			// never happened.
			if err := os.WriteFile(place+SegmentSuffix, unfolded, 0o600); err != nil {
				t.Fatal(err)
			}
			j = openAppend(t, place)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if e2, b2 := tableEntries(t, place); e2 != entries || b2 != bytes {
				t.Errorf("a folded segment folded again: %d entries, %d bytes; want %d, %d", e2, b2, entries, bytes)
			}
		})
	}
}

// TestSegmentFoldBeforeReads: a synced step is in the segment, not yet in
// the tables; a read that could see it (a listing, a run by its key or run
// id, a resume) folds it first, and one that could not leaves it pending.
func TestSegmentFoldBeforeReads(t *testing.T) {
	place := filepath.Join(t.TempDir(), File)
	j := openAppend(t, place)
	ctx := context.Background()
	for _, read := range []struct {
		name string
		fn   func(runID string) error
	}{
		{"Summaries", func(string) error { _, err := j.Summaries(ctx, ListFilter{}); return err }},
		{"ByKey", func(id string) error { _, err := j.ByKey(ctx, "key-"+id); return err }},
		{"ByRunID", func(id string) error { _, err := j.ByRunID(ctx, id); return err }},
	} {
		t.Run(read.name, func(t *testing.T) {
			id := "run-" + read.name
			r := begin(t, j, id)
			defer r.Release()
			before, _ := tableEntries(t, place)
			record(t, r, 1)
			if err := r.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if n, _ := tableEntries(t, place); n != before {
				t.Fatalf("the tables hold %d entries after Sync, want %d (the step in the segment)", n, before)
			}
			if _, err := j.ByKey(ctx, "key-of-no-run"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("ByKey of no run: %v", err)
			}
			if n, _ := tableEntries(t, place); n != before {
				t.Errorf("a read of another run folded the segment: %d entries, want %d", n, before)
			}
			if err := read.fn(id); err != nil {
				t.Fatal(err)
			}
			if n, _ := tableEntries(t, place); n != before+2 {
				t.Errorf("after %s the tables hold %d entries, want %d", read.name, n, before+2)
			}
		})
	}
}

// TestSegmentConcurrentReadersDuringFolds: turns write runs while readers
// list and look them up, with folds between: every read succeeds and
// every run, once synced, is found with all its entries.
func TestSegmentConcurrentReadersDuringFolds(t *testing.T) {
	place := filepath.Join(t.TempDir(), File)
	j := openAppend(t, place)
	ctx := context.Background()
	const writers, runs = 3, 15
	done := make(chan struct{})
	var wg, rg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range writers {
		wg.Go(func() {
			for i := range runs {
				id := fmt.Sprintf("run-%d-%d", w, i)
				r, err := j.Begin(ctx, Start{RunID: id, Key: "key-" + id, ParentKey: "p", Task: "t"})
				if err != nil {
					errs <- err
					return
				}
				for step := 1; step <= 2; step++ {
					if err := r.RecordStep(ctx, runtime.JournalStep{Step: step, Fingerprint: "fp", Response: []byte(`{"choices":[]}`)}); err != nil {
						errs <- err
						return
					}
					if err := r.Sync(ctx); err != nil {
						errs <- err
						return
					}
				}
				if err := r.RecordEnd(ctx, runtime.JournalEnd{Result: []byte(`{}`)}); err != nil {
					errs <- err
					return
				}
				r.Release()
				got, err := j.Summaries(ctx, ListFilter{RunID: id})
				if err != nil || len(got) != 1 || got[0].Steps != 2 {
					errs <- fmt.Errorf("run %s after its Sync: %+v, %v; want it with 2 steps", id, got, err)
					return
				}
			}
		})
	}
	for range 2 {
		rg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := j.List(ctx, 20); err != nil {
					errs <- err
					return
				}
				if _, err := j.ByKey(ctx, "key-run-0-0"); err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := tableEntries(t, place); n != writers*runs*2 {
		t.Errorf("after Close the tables hold %d entries, want %d", n, writers*runs*2)
	}
}

// TestFrameRoundTrip: every kind of op reads back as it was written.
func TestFrameRoundTrip(t *testing.T) {
	ops := []op{
		{kind: opStart, id: 7, now: 123, bytes: 9, start: &Start{RunID: "r", Key: "k", ParentKey: "p", Credential: "c", Task: "task", Settings: []byte(`{}`)}, sum: "s"},
		{kind: opEntry, id: 7, now: 124, bytes: 3, e: entryRow{seq: 1, kind: "step", step: 1, callID: "", key: "", fingerprint: "fp", payload: []byte(`{"a":1}`), sum: "x"}},
		{kind: opEnd, id: 7, now: 125, state: StateDone, result: []byte{}, errMsg: ""},
		{kind: opEnd, id: 8, now: 126, state: StateFailed, result: nil, errMsg: "boom"},
	}
	var data []byte
	data = append(data, segMagic...)
	data = binary.BigEndian.AppendUint64(data, 3)
	for _, o := range ops {
		data = appendFrame(data, o)
	}
	sc, err := readSegment("seg", data)
	if err != nil {
		t.Fatal(err)
	}
	if sc.gen != 3 || len(sc.ops) != len(ops) || sc.torn != 0 || len(sc.broken) != 0 {
		t.Fatalf("read back %+v", sc)
	}
	for i, o := range sc.ops {
		w := ops[i]
		if fmt.Sprintf("%v %v %v %v %+v %+v %q %v %q", o.kind, o.id, o.now, o.bytes, o.start, o.e, o.result, o.result == nil, o.errMsg) !=
			fmt.Sprintf("%v %v %v %v %+v %+v %q %v %q", w.kind, w.id, w.now, w.bytes, w.start, w.e, w.result, w.result == nil, w.errMsg) || o.sum != w.sum || o.state != w.state {
			t.Errorf("op %d: read %+v, wrote %+v", i, o, w)
		}
	}
}
