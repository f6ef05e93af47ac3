package pool

import (
	"runtime/debug"
	"sync"
	"time"
)

// Memory back to the OS after a large answer. Reading an answer of
// megabytes leaves go-sdk's buffers and the raw copies of the JSON behind
// as garbage; the Go runtime returns such memory to the OS only gradually
// (its scavenger), so an agent that read one 16 MiB answer kept a resident
// set tens of MiB larger for minutes. After a request whose answer passed
// bigAnswer bytes (read whole or refused at the cap), the pool calls
// debug.FreeOSMemory (a forced GC, then every free span returned)
// freeDelay after the request is done (go-sdk's reading goroutine may
// still hold its buffer when the call returns), at most once per
// freeEvery for the whole process: a GC per large answer is cheap next to
// reading it, and the rate bound keeps a stream of large answers from
// turning into a stream of GCs. The return runs on a timer's goroutine,
// never on the caller's.

const (
	bigAnswer = 4 << 20 // bytes of an answer after which memory is returned
	freeEvery = 10 * time.Second
	freeDelay = 250 * time.Millisecond
)

// osMemory rate-limits the returns; it is process-wide, as FreeOSMemory is.
var osMemory = &memoryReturn{every: freeEvery, now: time.Now, free: func() { time.AfterFunc(freeDelay, debug.FreeOSMemory) }}

type memoryReturn struct {
	every time.Duration
	now   func() time.Time
	free  func()

	mu    sync.Mutex // protects following fields
	last  time.Time  // of the last return
	count int        // returns made, for tests
}

// afterBigAnswer returns memory to the OS unless it did within every
// (free is called outside the lock; osMemory's only arms a timer).
func (m *memoryReturn) afterBigAnswer() {
	m.mu.Lock()
	now := m.now()
	if !m.last.IsZero() && now.Sub(m.last) < m.every {
		m.mu.Unlock()
		return
	}
	m.last = now
	m.count++
	m.mu.Unlock()
	m.free()
}
