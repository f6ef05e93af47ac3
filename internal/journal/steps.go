package journal

// Reading a run's entries without resuming it: what the console shows of a
// run's model steps (the agent server's GET /runs/<id>/steps/<n>). Resume
// claims a run before it loads its entries; a reader must not, since a
// read would then refuse the run's own resume, and a running run could not
// be read at all. The entries are checked as a resume checks them (load),
// so a reader never shows a state a resume would refuse.

import (
	"context"

	"github.com/switchboard-run/switchboard/runtime"
)

// Entries returns the newest run with chain run id runID and what it
// journaled so far (its steps and delegations, in order; Attempt is its
// attempts). It claims nothing and writes nothing. It fails with
// ErrNotFound for no such run, and ErrCorrupt for an entry that does not
// check (the run is left as it is: marking it broken is a resume's call).
func (j *Journal) Entries(ctx context.Context, runID string) (*Info, runtime.JournalReplay, error) {
	info, err := j.ByRunID(ctx, runID)
	if err != nil {
		return nil, runtime.JournalReplay{}, err
	}
	rp, _, err := j.load(ctx, info)
	if err != nil {
		return nil, runtime.JournalReplay{}, err
	}
	rp.Attempt = info.Attempts
	return info, rp, nil
}
