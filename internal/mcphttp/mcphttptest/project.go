package mcphttptest

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Project makes a project directory in t's temporary directory holding
// copies of the named bundled agents (agent.json and tools/, not their Go
// sources), so that tests never write under the repository.
func Project(t testing.TB, agents ...string) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range agents {
		src := filepath.Join(root, "agents", name)
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, path)
			dst := filepath.Join(dir, "agents", name, rel)
			if d.IsDir() {
				if rel != "." && rel != "tools" {
					return filepath.SkipDir
				}
				return os.MkdirAll(dst, 0o755)
			}
			if rel != "agent.json" && filepath.Dir(rel) != "tools" {
				return nil // the Go sources
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers, for capturing a
// process's output.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
