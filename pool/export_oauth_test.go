package pool

import "time"

// SetOAuthNow moves the clock token expiry is judged by, until restore.
func SetOAuthNow(now func() time.Time) (restore func()) {
	old := oauthNow
	oauthNow = now
	return func() { oauthNow = old }
}
