package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// summaryTask is how many characters of a run's task a Summary keeps: a
// listing shows a line of it, and a journal may hold thousands of runs.
const summaryTask = 200

// A ListFilter selects the runs Summaries returns. The zero value is every
// run.
type ListFilter struct {
	// Credential, when set, keeps only the runs started with that
	// credential digest (Start.Credential): a caller sees the runs it may
	// resume, as Resume by run id only finds those.
	Credential string
	// RunID, when set, keeps only the runs with that chain run id.
	RunID string
	// States, when set, keeps only runs in one of them.
	States []State
	// Limit bounds the runs returned, newest first; zero or less: all.
	Limit int
}

// A Summary is a run as a listing shows it: its Info, with Task cut to
// summaryTask characters and no Settings or Result, and what its entries
// and its end say.
type Summary struct {
	Info
	// Steps and Delegations are the model steps and delegations journaled.
	Steps, Delegations int
	// Status and Reason are the runtime.Result's of a run that ended
	// (answered, not_answered, ...), empty before.
	Status, Reason string
}

// Summaries lists the runs f selects, newest first, in one query.
func (j *Journal) Summaries(ctx context.Context, f ListFilter) ([]Summary, error) {
	if err := j.flush(ctx); err != nil {
		return nil, err
	}
	out, err := j.st.summaries(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("run journal %s: listing: %w", j.Where(), err)
	}
	for i := range out {
		// What the end says, read here rather than in SQL: one run whose
		// result does not parse leaves its Status empty instead of failing
		// the whole listing (a resume of it reports the corruption).
		var end struct{ Status, Reason string }
		if len(out[i].Result) > 0 && json.Unmarshal(out[i].Result, &end) == nil {
			out[i].Status, out[i].Reason = end.Status, end.Reason
		}
		out[i].Result = nil
	}
	return out, nil
}

// summaryQuery is the listing's SQL over the tables runs and entries, with
// placeholder(n) rendering the n-th parameter; the columns are those
// scanSummary reads.
func summaryQuery(f ListFilter, runs, entries string, placeholder func(int) string) (string, []any) {
	args := []any{summaryTask}
	next := func(v any) string {
		args = append(args, v)
		return placeholder(len(args))
	}
	limit := placeholder(1)
	var where []string
	if f.Credential != "" {
		where = append(where, "credential = "+next(f.Credential))
	}
	if f.RunID != "" {
		where = append(where, "run_id = "+next(f.RunID))
	}
	if len(f.States) > 0 {
		in := make([]string, len(f.States))
		for i, st := range f.States {
			in[i] = next(string(st))
		}
		where = append(where, "state IN ("+strings.Join(in, ", ")+")")
	}
	q := `SELECT id, run_id, idem_key, parent_key, credential, substr(task, 1, ` + limit + `), state, attempts, result, error, bytes, created_ms, updated_ms,
		(SELECT count(*) FROM ` + entries + ` e WHERE e.run = r.id AND e.kind = 'step'),
		(SELECT count(*) FROM ` + entries + ` e WHERE e.run = r.id AND e.kind = 'delegation')
		FROM ` + runs + ` r`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	// Newest first by creation: ids are in order on SQLite but random on
	// PostgreSQL (replicas number runs without a shared sequence).
	q += " ORDER BY created_ms DESC, id DESC"
	if f.Limit > 0 {
		q += " LIMIT " + next(f.Limit)
	}
	return q, args
}

// scanSummary reads a row of summaryQuery.
func scanSummary(row interface{ Scan(...any) error }) (Summary, error) {
	var (
		s                Summary
		key              *string
		state            string
		result           []byte
		created, updated int64
	)
	if err := row.Scan(&s.ID, &s.RunID, &key, &s.ParentKey, &s.Credential, &s.Task, &state, &s.Attempts, &result, &s.Error, &s.Bytes, &created, &updated,
		&s.Steps, &s.Delegations); err != nil {
		return Summary{}, err
	}
	if key != nil {
		s.Key = *key
	}
	s.State, s.Result = State(state), result
	s.Created, s.Updated = time.UnixMilli(created), time.UnixMilli(updated)
	return s, nil
}

func (s *sqliteStore) summaries(ctx context.Context, f ListFilter) ([]Summary, error) {
	if err := s.settle(ctx, nil); err != nil {
		return nil, err
	}
	q, args := summaryQuery(f, "runs", "entries", func(int) string { return "?" })
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Summary
	for rows.Next() {
		sm, err := scanSummary(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, rows.Err()
}

func (s *pgStore) summaries(ctx context.Context, f ListFilter) ([]Summary, error) {
	q, args := summaryQuery(f, "journal_runs", "journal_entries", func(n int) string { return "$" + strconv.Itoa(n) })
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Summary, error) { return scanSummary(r) })
}
