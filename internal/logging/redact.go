package logging

import (
	"os"
	"regexp"
	"strings"
)

// The same redaction as the log lines', for text that leaves the process by
// another way: an error in a tool result, a line on stderr that becomes an
// agent's last_error, a model endpoint's error body. By value (the secrets
// of the environment, and any the caller knows, such as the API key it
// sent), and by key (what follows a credential's name in a URL query or an
// Authorization-like phrase, and the shape of an OpenAI key), since an error
// body may echo a credential the process never held as a variable.

var keyedSecrets = []*regexp.Regexp{
	// ?key=..., &api_key=..., ;token=... in a URL.
	regexp.MustCompile(`(?i)([?&;](?:[a-z0-9_.-]*?(?:key|token|secret|password|passwd|auth|signature|sig))=)[^&;#\s"'<>]+`),
	// "Bearer <token>", "Basic <credentials>", in headers or echoed text.
	regexp.MustCompile(`(?i)\b((?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=-]{6,}`),
	// user:password@ in a URL.
	regexp.MustCompile(`(://[^/\s:@"']*:)[^@\s/"']+@`),
	// OpenAI-style keys, wherever they appear.
	regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{8,}`),
}

// Scrub returns s with every secret value and every keyed credential
// replaced by Redacted. secrets are added to the environment's.
func Scrub(s string, secrets ...string) string {
	for _, sec := range append(SecretsFromEnv(os.Environ()), secrets...) {
		if len(sec) >= minSecretLen {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	for i, re := range keyedSecrets {
		switch i {
		case 2:
			s = re.ReplaceAllStringFunc(s, func(m string) string {
				if strings.HasSuffix(m, ":xxxxx@") {
					return m // url.URL.Redacted has been there already
				}
				return re.ReplaceAllString(m, "${1}"+Redacted+"@")
			})
		case 3:
			s = re.ReplaceAllString(s, Redacted)
		default:
			s = re.ReplaceAllString(s, "${1}"+Redacted)
		}
	}
	return s
}

// RedactError returns err with its message scrubbed; errors.Is and
// errors.As still see err and everything it wraps. nil stays nil.
func RedactError(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := Scrub(err.Error(), secrets...)
	if msg == err.Error() {
		return err
	}
	return &redactedError{err: err, msg: msg}
}

type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
