package suitetable

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
)

// Rows collects a suite's rows, of type R, in the order its tests record
// them; tests running in parallel may record at once.
type Rows[R any] struct {
	mu   sync.Mutex
	rows []R
}

// Add records r.
func (t *Rows[R]) Add(r R) {
	t.mu.Lock()
	t.rows = append(t.rows, r)
	t.mu.Unlock()
}

// All returns the rows recorded so far.
func (t *Rows[R]) All() []R {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]R(nil), t.rows...)
}

// WriteFile writes table, the suite's whole table, as indented JSON to
// path, the -PREFIX.table file that [Suite.Table] reads back.
func WriteFile(path string, table any) error {
	data, err := json.MarshalIndent(table, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Clean(path), data, 0o644)
}
