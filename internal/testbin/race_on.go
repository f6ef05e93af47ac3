//go:build race

package testbin

// raceEnabled reports whether this test binary was built with -race; the
// switchboard binary it builds then is too, so the processes an end-to-end
// test starts are race-checked as well as the test itself.
const raceEnabled = true
