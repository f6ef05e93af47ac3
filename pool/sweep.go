package pool

import "time"

// startCleanerLocked starts the idle cleaner if it is not running. Like
// database/sql's connectionCleaner it starts lazily, with the first entry.
// p.mu must be held.
func (p *Pool) startCleanerLocked() {
	if p.cleanerOn || p.opts.IdleTimeout < 0 {
		return
	}
	p.cleanerOn = true
	p.bg.Add(1)
	go p.cleaner()
}

// cleaner closes entries idle for longer than IdleTimeout. It never closes
// an entry with requests in flight.
func (p *Pool) cleaner() {
	defer p.bg.Done()
	period := max(p.opts.IdleTimeout/2, time.Millisecond)
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-p.closeNow:
			return
		case <-t.C:
		}
		for _, e := range p.collectIdle(time.Now()) {
			p.closeEntry(e, reasonIdle)
		}
		testHookCleanerSwept()
		t.Reset(period)
	}
}

// collectIdle takes the idle entries out of the pool under the lock; the
// caller closes them after it is released.
func (p *Pool) collectIdle(now time.Time) []*entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var idle []*entry
	for k, e := range p.entries {
		// A session just dialed for callers that have not reached it yet
		// is not idle, however long they take to get there.
		// Nor is one with a resource subscription: the server's updates
		// come on it (subscribe.go).
		if e.inUse == 0 && e.reserved == 0 && e.subscribed.Load() == 0 && now.Sub(e.lastUsed) >= p.opts.IdleTimeout {
			delete(p.entries, k)
			// The key's bookkeeping goes with its last session: a pool that
			// sees many identities over time must not keep an entry per
			// identity it ever served. A later dial of k starts afresh
			// (generation 1, its era discovered again unless pinned).
			delete(p.keys, k)
			e.state = stateClosed
			e.closeReason = reasonIdle
			idle = append(idle, e)
		}
	}
	return idle
}
