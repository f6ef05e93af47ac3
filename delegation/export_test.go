package delegation

// SetTestHookEntries sets the hook that chain checks call with the number of
// entries they looked at, and returns a function that restores the old one.
func SetTestHookEntries(f func(int)) (restore func()) {
	old := testHookEntries
	testHookEntries = f
	return func() { testHookEntries = old }
}
