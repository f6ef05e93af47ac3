package runtime

import "time"

// SetStillWorkingEvery replaces how long a model request goes quiet
// before the turn notes that the model is still working, so that a test
// sees the note without waiting ten seconds for it.
func SetStillWorkingEvery(a *Agent, d time.Duration) { a.stream.stillEvery = d }
