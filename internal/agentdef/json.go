package agentdef

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// These helpers are a copy of the few lines mcpconfig uses for the same job:
// walk a JSON object member by member, so that a duplicate key is an error
// instead of encoding/json silently keeping the last one. A shared package
// for ~60 lines would cost more than the copy.

// A member is one "key": value pair of a JSON object.
type member struct {
	key string
	raw json.RawMessage
}

// errDuplicate reports a key that occurs twice in one object.
type errDuplicate struct{ key string }

func (e *errDuplicate) Error() string { return fmt.Sprintf("duplicate key %q", e.key) }

// members returns the members of the JSON object obj in order, or an
// *errDuplicate for the first key seen twice. obj must be valid JSON (see
// [syntaxError]) holding an object.
func members(obj json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // the opening '{'
		return nil, err
	}
	var ms []member
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
			return nil, &errDuplicate{key}
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		ms = append(ms, member{key, raw})
	}
	return ms, nil
}

// kind names the JSON type of the valid JSON value raw, as users know it.
func kind(raw []byte) string {
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

// syntaxError checks that data is one valid JSON value and otherwise returns
// the error with its 1-based line and column.
func syntaxError(data []byte) (line, col int, err error) {
	var v any
	err = json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return 0, 0, err // nil, or an error without a position (nesting too deep)
	}
	pos := min(max(int(se.Offset)-1, 0), len(data)) // the byte that failed
	lineStart := bytes.LastIndexByte(data[:pos], '\n') + 1
	line = 1 + bytes.Count(data[:pos], []byte("\n"))
	col = 1 + utf8.RuneCount(data[lineStart:pos])
	return line, col, err
}
