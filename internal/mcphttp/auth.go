package mcphttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// CheckBearer reports whether r carries "Authorization: Bearer <token>".
// Both sides are hashed before the constant-time comparison so that neither
// the content nor the length of the token leaks through timing.
func CheckBearer(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	a := sha256.Sum256([]byte(strings.TrimSpace(got)))
	b := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// WriteUnauthorized answers 401 with the challenge RFC 6750 asks for.
func WriteUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
	WriteJSONError(w, http.StatusUnauthorized, "a bearer token is required: send Authorization: Bearer <token> (the value of SWITCHBOARD_TOKEN)")
}

// RequireBearer wraps next so that every request must carry token. A
// request that does vouches for its connection ([Vouch]).
func RequireBearer(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !CheckBearer(r, token) {
			WriteUnauthorized(w)
			return
		}
		Vouch(r)
		next.ServeHTTP(w, r)
	})
}

// Admit checks what every endpoint of ours checks before anything else,
// and answers the refusal itself: Host and Origin first (403, against DNS
// rebinding: a rebinding page must not even learn whether a token is
// required), then the bearer token when token is not empty (401). A request
// that passes vouches for its connection ([Vouch]) and Admit reports true.
// It is the one implementation of this guard: the MCP handler, the studio
// and an agent's /runs all call it.
func Admit(w http.ResponseWriter, r *http.Request, token string) bool {
	if err := CheckHost(r); err != nil {
		WriteJSONError(w, http.StatusForbidden, err.Error())
		return false
	}
	if err := CheckOrigin(r); err != nil {
		WriteJSONError(w, http.StatusForbidden, err.Error())
		return false
	}
	if token != "" && !CheckBearer(r, token) {
		WriteUnauthorized(w)
		return false
	}
	// Host, Origin and the token passed: the connection has proved itself
	// (conns.go), and gives way to a new one only after every unproved one.
	Vouch(r)
	return true
}

// Guard wraps next so that it sees only requests [Admit] lets through.
func Guard(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Admit(w, r, token) {
			next.ServeHTTP(w, r)
		}
	})
}

// credential is the digest of the request's Authorization header: what a
// session is bound to. Empty when there is none, so unauthenticated sessions
// are bound to "no credential", which an authenticated request also does not
// match.
func credential(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}
