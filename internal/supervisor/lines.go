package supervisor

import (
	"bytes"
	"io"
	"sync"
)

// maxLine bounds a buffered line; a child that writes more without a newline
// has it relayed in pieces rather than held in memory.
const maxLine = 64 << 10

// lineWriter splits what a child writes into lines and hands each to line.
// It is a child's Stdout or Stderr, so exec copies into it from its own
// goroutine and cmd.Wait waits for that copy to end.
type lineWriter struct {
	line func(string)

	mu  sync.Mutex // protects buf
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(bytes.TrimSuffix(w.buf[:i], []byte("\r"))))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLine {
		w.line(string(w.buf))
		w.buf = nil
	}
	if len(w.buf) == 0 {
		w.buf = nil // let a large burst's array go
	}
	return len(p), nil
}

// flush hands on a last line that had no newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}

// Output serializes whole-line writes from every child's relay onto one
// writer, as log.Logger does, so lines never interleave mid-line.
type Output struct {
	mu  sync.Mutex // protects w
	w   io.Writer
	tap func(agent, line string)
}

// NewOutput writes the agents' lines to w; tap, when not nil, also gets
// every line with the name of the agent that wrote it (the agent page's
// log tail).
func NewOutput(w io.Writer, tap func(agent, line string)) *Output {
	return &Output{w: w, tap: tap}
}

func (s *Output) writeLine(agent, prefix, line string) {
	if s.tap != nil {
		s.tap(agent, line)
	}
	b := make([]byte, 0, len(prefix)+len(line)+1)
	b = append(b, prefix...)
	b = append(b, line...)
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(b)
}
