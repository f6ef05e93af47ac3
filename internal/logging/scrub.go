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
	return &Scrubber{secrets: keep}
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
func (sc *Scrubber) JSON(raw []byte) []byte {
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
