package logging

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Scrubber applies the log lines' redaction rules to text and JSON that is
// shown rather than logged (the studio page shows tool arguments, results
// and agents' log lines): a value under a credential's key is replaced, and
// so is any occurrence of a secret value in any string.
type Scrubber struct {
	secrets []string
	// escapable: a secret has a character JSON may write as an escape
	// other than \u ("\/" for '/', and the characters that must be
	// escaped), so only the full pass finds it.
	escapable bool
}

// NewScrubber returns a Scrubber for the given secret values; values shorter
// than the minimum the loggers use are ignored for the same reason.
func NewScrubber(secrets []string) *Scrubber {
	var keep []string
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			keep = append(keep, s)
		}
	}
	sc := &Scrubber{secrets: keep}
	for _, s := range keep {
		if strings.ContainsFunc(s, func(r rune) bool { return r == '"' || r == '\\' || r == '/' || r < 0x20 }) {
			sc.escapable = true
		}
	}
	return sc
}

// String replaces every secret value in s.
func (sc *Scrubber) String(s string) string {
	for _, sec := range sc.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return s
}

// JSON returns raw with credentials redacted: the value of any object
// member whose key names a credential, and secret values inside any string
// (keys included). Text that is not JSON is scrubbed as a string.
//
// JSON in which nothing could be redacted is only compacted: decoding it
// to values and encoding them again cost the studio about a tenth of its
// CPU per proxied call, for a result that came out as it went in.
func (sc *Scrubber) JSON(raw []byte) []byte {
	if sc.clean(raw) {
		var out bytes.Buffer
		out.Grow(len(raw))
		if json.Compact(&out, raw) == nil {
			return out.Bytes()
		}
	}
	return sc.fullJSON(raw)
}

// fullJSON is JSON's full pass: decode, redact, encode.
func (sc *Scrubber) fullJSON(raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep numbers as they were written
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return []byte(sc.String(string(raw)))
	}
	out, err := json.Marshal(sc.value(v))
	if err != nil {
		return []byte(sc.String(string(raw)))
	}
	return out
}

func (sc *Scrubber) value(v any) any {
	switch t := v.(type) {
	case string:
		return sc.String(t)
	case []any:
		for i := range t {
			t[i] = sc.value(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if isSecretKey(k) {
				out[sc.String(k)] = Redacted
				continue
			}
			out[sc.String(k)] = sc.value(val)
		}
		return out
	}
	return v
}

// secretKeyWords are what every key isSecretKey names contains, lower-cased.
var secretKeyWords = [][]byte{[]byte("authorization"), []byte("token"), []byte("bearer"), []byte("api_key"), []byte("apikey"), []byte("password"), []byte("secret")}

// clean reports whether raw, taken as JSON, has nothing to redact: no \u
// escape (the only one that can write a letter, so every key reads as
// written), none of the words a credential's key contains anywhere
// (lower-cased as isSecretKey does, rune by rune), and no secret value
// (written as it reads, unless a secret has a character that JSON may
// escape otherwise: then any escape takes the full pass). A false "not
// clean" only costs the full pass; a false "clean" cannot happen.
func (sc *Scrubber) clean(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\u`)) || sc.escapable && bytes.IndexByte(raw, '\\') >= 0 {
		return false
	}
	lower := bytes.ToLower(raw)
	for _, w := range secretKeyWords {
		if bytes.Contains(lower, w) {
			return false
		}
	}
	for _, sec := range sc.secrets {
		if bytes.Contains(raw, []byte(sec)) {
			return false
		}
	}
	return true
}
