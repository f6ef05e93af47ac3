package strictjson

import (
	"errors"
	"testing"
)

func TestMembersKeepOrderAndRefuseDuplicates(t *testing.T) {
	ms, err := Members([]byte(`{"b": 1, "a": {"x": [1]}}`))
	if err != nil || len(ms) != 2 || ms[0].Key != "b" || ms[1].Key != "a" || string(ms[1].Raw) != `{"x": [1]}` {
		t.Fatalf("Members = %+v, %v", ms, err)
	}
	_, err = Members([]byte(`{"a": 1, "b": 2, "a": 3}`))
	var dup *DuplicateKeyError
	if !errors.As(err, &dup) || dup.Key != "a" {
		t.Fatalf("want a duplicate-key error for \"a\", got %v", err)
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	line, col, err := SyntaxError([]byte("{\n  \"a\": 1,\n  \"b\" 2\n}"))
	if err == nil || line != 3 || col != 7 {
		t.Fatalf("SyntaxError = %d:%d %v, want 3:7", line, col, err)
	}
	if _, _, err := SyntaxError([]byte(`{"ok": true}`)); err != nil {
		t.Fatal(err)
	}
}

func TestKind(t *testing.T) {
	for raw, want := range map[string]string{`{}`: "object", ` [1]`: "array", `"s"`: "string", `true`: "boolean", `null`: "null", `-1.5`: "number", ``: "nothing"} {
		if got := Kind([]byte(raw)); got != want {
			t.Errorf("Kind(%q) = %q, want %q", raw, got, want)
		}
	}
}
