package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/runtime"
)

// A Run is one attempt of a journaled run, claimed in this process until
// Release: it is the runtime.Journal the turn writes to.
type Run struct {
	j      *Journal
	info   Info
	replay runtime.JournalReplay

	mu       sync.Mutex // protects following; held across an entry's enqueue so entries keep their order
	seq      int
	released bool
	last     *batch // the batch this run's last write went into

	errMu sync.Mutex // protects err; apart from mu, which a writer may wait under
	err   error      // the first write of the run that failed
}

var _ runtime.Journal = (*Run)(nil)

// Info is what the journal knew of the run when this attempt began.
func (r *Run) Info() Info { return r.info }

// Replay implements runtime.Journal.
func (r *Run) Replay() runtime.JournalReplay { return r.replay }

// RecordStep implements runtime.Journal: the step is queued, and committed
// with the next batch; Sync waits for it.
func (r *Run) RecordStep(ctx context.Context, s runtime.JournalStep) error {
	payload, err := encodeStep(s)
	if err != nil {
		return fmt.Errorf("run journal: run %s, step %d: %w", r.info.RunID, s.Step, err)
	}
	return r.append("step", s.Step, "", "", s.Fingerprint, payload)
}

// RecordDelegation implements runtime.Journal.
func (r *Run) RecordDelegation(ctx context.Context, d runtime.JournalDelegation) error {
	payload, err := encodeDelegation(d)
	if err != nil {
		return fmt.Errorf("run journal: run %s, step %d, call %s: %w", r.info.RunID, d.Step, d.CallID, err)
	}
	return r.append("delegation", d.Step, d.CallID, d.Key, "", payload)
}

// encodeStep is json.Marshal(s), the format load reads, without
// json.Marshal's second pass over s.Response: the runtime hands over the
// response as json.Marshal wrote it, and json.Marshal would scan and copy
// those bytes again (the largest part of a step) only to check them. A
// Response that is not JSON is stored as a string (appendRaw), which the
// runtime then cannot read back as a response: the run is not resumed.
func encodeStep(s runtime.JournalStep) ([]byte, error) {
	fp, err := json.Marshal(s.Fingerprint)
	if err != nil {
		return nil, err
	}
	usage, err := json.Marshal(s.Usage)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(s.Response)+len(fp)+len(usage)+64)
	b = append(b, `{"Step":`...)
	b = strconv.AppendInt(b, int64(s.Step), 10)
	b = append(b, `,"Fingerprint":`...)
	b = append(b, fp...)
	b = append(b, `,"Response":`...)
	b = appendRaw(b, s.Response)
	b = append(b, `,"Usage":`...)
	b = append(b, usage...)
	return append(b, '}'), nil
}

// encodeDelegation is encodeStep's counterpart for a delegation.
func encodeDelegation(d runtime.JournalDelegation) ([]byte, error) {
	head, err := json.Marshal(struct {
		Step    int
		CallID  string
		Key     string
		Outcome delegation.Outcome
	}{d.Step, d.CallID, d.Key, d.Outcome})
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(head)+len(d.Result)+16)
	b = append(b, head[:len(head)-1]...) // without its closing brace
	b = append(b, `,"Result":`...)
	b = appendRaw(b, d.Result)
	return append(b, '}'), nil
}

// appendRaw appends raw, a JSON object or array as the runtime's
// json.Marshal wrote it, as it is. Anything else (which the runtime never
// hands over) is compacted and checked, as json.Marshal would; what is not
// JSON is stored as a string, which load refuses to read back as a
// response or a result: a corrupt entry, reported, the run not resumed.
// A raw that starts and ends like JSON but is not is caught the same way,
// on load, where the entry fails to parse.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...) // as json.Marshal writes a nil RawMessage
	}
	if n := len(raw); n >= 2 && (raw[0] == '{' && raw[n-1] == '}' || raw[0] == '[' && raw[n-1] == ']') {
		return append(b, raw...)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		s, _ := json.Marshal(string(raw))
		return append(b, s...)
	}
	return append(b, buf.Bytes()...)
}

func (r *Run) append(kind string, step int, callID, key, fp string, payload []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return fmt.Errorf("run journal: run %s: recording after its attempt ended", r.info.RunID)
	}
	if err := r.failed(); err != nil {
		return err
	}
	e := entryRow{seq: r.seq + 1, kind: kind, step: step, callID: callID, key: key, fingerprint: fp, payload: payload,
		sum: entrySum(kind, step, callID, key, fp, payload)}
	if err := r.enqueueLocked(op{kind: opEntry, e: e, bytes: int64(len(payload))}); err != nil {
		return err
	}
	r.seq = e.seq
	return nil
}

// Sync implements runtime.Journal: it returns once everything the run
// recorded is committed (the batches commit in order, so waiting for the
// one its last write went into is enough), or with the error that kept it
// from being.
func (r *Run) Sync(ctx context.Context) error {
	r.mu.Lock()
	b := r.last
	r.mu.Unlock()
	if b != nil {
		if err := r.j.wait(ctx, b); err != nil {
			return err
		}
	}
	return r.failed()
}

// RecordEnd implements runtime.Journal. The end is queued, not waited for:
// nothing is acted on after it, and the answer it holds reaches a keyed
// caller through the idempotency ledger's record, committed before it is
// sent (docs/DURABILITY.md §1).
func (r *Run) RecordEnd(ctx context.Context, e runtime.JournalEnd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failed(); err != nil {
		return err
	}
	// Ended by itself (answered, or max_steps): done, and a resume returns
	// this end.
	state := StateDone
	switch {
	case e.Broken:
		state = StateBroken
	case e.Err != "" && e.Resumable:
		state = StateFailed
	}
	if err := r.enqueueLocked(op{kind: opEnd, state: state, result: []byte(e.Result), errMsg: e.Err, bytes: int64(len(e.Result))}); err != nil {
		return err
	}
	r.info.State = state
	return nil
}

func (r *Run) enqueue(o op) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.enqueueLocked(o)
}

func (r *Run) enqueueLocked(o op) error {
	o.run, o.id, o.now = r, r.info.ID, r.j.opts.Now().UnixMilli()
	b, err := r.j.enqueue(o)
	if err != nil {
		return err
	}
	r.last = b
	r.j.mu.Lock()
	r.j.bytes += o.bytes
	r.j.mu.Unlock()
	return nil
}

// fail records err as the run's write failure, the first one kept.
func (r *Run) fail(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
}

func (r *Run) failed() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// Release ends this attempt's claim on the run; it is idempotent. What the
// run queued is still committed. A run released without an end stays
// running in the journal until the process ends (the next Open marks it
// interrupted) or an attempt resumes it.
func (r *Run) Release() {
	r.mu.Lock()
	already := r.released
	r.released = true
	r.mu.Unlock()
	if !already {
		r.j.release(r.info.ID)
	}
}
