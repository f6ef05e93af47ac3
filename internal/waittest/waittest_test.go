package waittest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	Until(t, 10*time.Second, "five increments", func() bool { return n.Load() == 5 })
}

// fatalTB records a Fatalf instead of ending the test it wraps.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func TestUntilFailsNamingWhatItWaitedFor(t *testing.T) {
	f := &fatalTB{TB: t}
	polls := 0
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("Until returned or panicked with %v; want a Fatalf", r)
			}
		}()
		Until(f, 30*time.Millisecond, "the impossible", func() bool { polls++; return false })
	}()
	if !strings.Contains(f.msg, "the impossible") || !strings.Contains(f.msg, "30ms") {
		t.Errorf("failure %q does not name what was awaited and for how long", f.msg)
	}
	if polls < 2 {
		t.Errorf("polled %d times within the timeout; want it polled again until the deadline", polls)
	}
}
