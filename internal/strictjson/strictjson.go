// Package strictjson holds what encoding/json does not: walking a JSON object
// member by member, in order, with duplicate keys as errors, and syntax
// errors with line and column. The mcp.json and agent.json loaders use it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// encoding/json keeps the last of two equal keys and forgets member order,
// and both matter here: a server defined twice is almost always a mistake,
// and servers keep their file order. So objects are walked member by member
// with a json.Decoder instead of unmarshaled into maps.

// A Member is one "key": value pair of a JSON object.
type Member struct {
	Key string
	Raw json.RawMessage
}

// DuplicateKeyError reports a key that occurs twice in one object.
type DuplicateKeyError struct{ Key string }

func (e *DuplicateKeyError) Error() string { return fmt.Sprintf("duplicate key %q", e.Key) }

// Members returns the members of the JSON object obj in order. It fails with
// an *DuplicateKeyError on the first key seen twice. obj must be valid JSON (see
// [SyntaxError]) holding an object.
func Members(obj json.RawMessage) ([]Member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // the opening '{'
		return nil, err
	}
	var ms []Member
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is %T, not a string", tok)
		}
		if seen[key] {
			return nil, &DuplicateKeyError{key}
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		ms = append(ms, Member{key, raw})
	}
	return ms, nil
}

// Kind names the JSON type of the valid JSON value raw, as users know it.
func Kind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// SyntaxError checks that data is one valid JSON value and otherwise returns
// the error with its 1-based line and column.
func SyntaxError(data []byte) (line, col int, err error) {
	var v any
	err = json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return 0, 0, err // nil, or an error without a position (nesting too deep)
	}
	// Offset counts the byte that could not be consumed (or is the length
	// of data at an unexpected end); point at that byte.
	pos := min(max(int(se.Offset)-1, 0), len(data))
	lineStart := bytes.LastIndexByte(data[:pos], '\n') + 1
	line = 1 + bytes.Count(data[:pos], []byte("\n"))
	col = 1 + utf8.RuneCount(data[lineStart:pos])
	return line, col, err
}
