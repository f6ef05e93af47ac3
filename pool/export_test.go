package pool

// SetStreamWaitHook makes f run each time Subscribe is about to wait for a
// session's standalone GET stream (getstream.go), until restore is called.
func SetStreamWaitHook(f func()) (restore func()) {
	testHookStreamWait.Store(&f)
	return func() { testHookStreamWait.Store(nil) }
}
