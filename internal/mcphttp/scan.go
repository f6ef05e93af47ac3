package mcphttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// A structural scanner for the few members the servers read of a body. It
// exists for cost: encoding/json's scanner looks at every byte through a
// state machine, twice for json.Unmarshal (validation, then decoding), and
// a RawMessage member is scanned again to be skipped. A body of a megabyte
// cost about 10 ms per parse that way, and the studio and the agent each
// parse it. Here a string is skipped with bytes.IndexByte, and a value the
// servers do not need is skipped without being decoded or copied: the
// members found are sub-slices of the body.
//
// The scanner checks structure (balanced brackets, terminated strings,
// separators), not every detail of the grammar: a large body that passes
// it but is not valid JSON is go-sdk's to refuse, which it does with a
// parse error. A small body (up to smallBody) is validated in full first,
// so the answers to malformed messages are the same as before.

// maxNesting bounds how deep the scanner follows arrays and objects; the
// messages MCP defines nest a handful of levels.
const maxNesting = 512

var errScan = errors.New("not valid JSON")

type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errScan, what, s.i)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// str skips a string starting at s.i (which is '"') and returns its raw
// text, quotes included.
func (s *scanner) str() ([]byte, error) {
	start := s.i
	s.i++
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			s.i = len(s.b)
			return nil, s.fail("unterminated string")
		}
		s.i += j
		// A quote preceded by an odd number of backslashes is escaped.
		k := s.i - 1
		for k > start && s.b[k] == '\\' {
			k--
		}
		s.i++
		if (s.i-2-k)%2 == 0 {
			return s.b[start:s.i], nil
		}
	}
}

// visit says what to do with the members of an object being scanned:
// member gets each member's raw key and value, child (when not nil) says
// how to visit a member's value when it is an object (nil: skip it). One
// pass over the body reaches every member the servers read.
type visit struct {
	member func(key string, val []byte)
	child  func(key string) *visit
}

// value skips one value and returns its raw text; an object is visited
// with v.
func (s *scanner) value(depth int, v *visit) ([]byte, error) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, s.fail("unexpected end")
	}
	start := s.i
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{' || c == '[':
		if depth >= maxNesting {
			return nil, s.fail("too deeply nested")
		}
		if c == '[' {
			v = nil
		}
		if err := s.container(depth, v); err != nil {
			return nil, err
		}
		return s.b[start:s.i], nil
	case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return s.b[start:s.i], nil
			}
			s.i++
		}
		return s.b[start:s.i], nil
	}
	return nil, s.fail(fmt.Sprintf("unexpected %q", s.b[s.i]))
}

// container skips the object or array at s.i, visiting an object's
// members with v (nil: none).
func (s *scanner) container(depth int, v *visit) error {
	open := s.b[s.i]
	end := byte(']')
	if open == '{' {
		end = '}'
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		return nil
	}
	for {
		var key string
		if open == '{' {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return s.fail("expected a member name")
			}
			raw, err := s.str()
			if err != nil {
				return err
			}
			key = unquoteKey(raw)
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return s.fail("expected ':'")
			}
			s.i++
		}
		var cv *visit
		if v != nil && v.child != nil {
			cv = v.child(key)
		}
		val, err := s.value(depth+1, cv)
		if err != nil {
			return err
		}
		if v != nil && v.member != nil {
			v.member(key, val)
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unexpected end")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case end:
			s.i++
			return nil
		default:
			return s.fail(fmt.Sprintf("unexpected %q", s.b[s.i]))
		}
	}
}

// unquoteKey returns a member name as encoding/json decodes it; only one
// with an escape or with bytes that are not UTF-8 needs decoding. The
// second matters for _meta: encoding/json turns each invalid byte into
// U+FFFD, and go-sdk decodes the body with it, so a key kept raw here
// would name a member go-sdk's request does not have.
func unquoteKey(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var k string
	if json.Unmarshal(raw, &k) != nil {
		return ""
	}
	return k
}

// scanObject scans body as one value, visiting it with v when it is an
// object, and checks that nothing follows it. isObject is false when body
// is another kind of value.
func scanObject(body []byte, v *visit) (isObject bool, err error) {
	s := &scanner{b: body}
	s.ws()
	isObject = s.i < len(s.b) && s.b[s.i] == '{'
	if _, err := s.value(0, v); err != nil {
		return isObject, err
	}
	s.ws()
	if s.i != len(s.b) {
		return isObject, s.fail("text after the value")
	}
	return isObject, nil
}
