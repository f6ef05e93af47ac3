package pool

import (
	"strings"
	"testing"
)

// TestSSEEventsCountsEachEvent: the count restarts at every blank line,
// whichever end-of-line the stream uses, and a single event past the limit
// is caught even when it arrives in pieces.
func TestSSEEventsCountsEachEvent(t *testing.T) {
	ev := func(data string) string { return "event: message\ndata: " + data + "\n\n" }
	for _, c := range []struct {
		name   string
		chunks []string
		over   bool
	}{
		{"many small events, LF", []string{strings.Repeat(ev("abcd"), 100)}, false},
		{"many small events, CRLF", []string{strings.Repeat("data: abcd\r\n\r\n", 100)}, false},
		{"many small events, CR", []string{strings.Repeat("data: abcd\r\r", 100)}, false},
		{"one event past the limit", []string{ev(strings.Repeat("x", 64))}, true},
		{"one event past the limit, in pieces", []string{"data: " + strings.Repeat("x", 30), strings.Repeat("y", 30), "\n", "data: zzzz\n\n"}, true},
		{"CRLF does not end an event by itself", []string{"data: " + strings.Repeat("x", 30) + "\r\n", "data: " + strings.Repeat("y", 30) + "\r\n\r\n"}, true},
	} {
		e := &sseEvents{limit: 64}
		over := false
		for _, ch := range c.chunks {
			over = over || e.count([]byte(ch))
		}
		if over != c.over {
			t.Errorf("%s: over %v, want %v", c.name, over, c.over)
		}
	}
}
