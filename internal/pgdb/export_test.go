package pgdb

import "time"

// SetRestartWait sets Retry's bound for one test, until restore.
func SetRestartWait(d time.Duration) (restore func()) {
	old := restartWait
	restartWait = d
	return func() { restartWait = old }
}
