package logging

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzScrubberJSONClean: whenever JSON takes the compact path, the full
// pass finds nothing to redact either: both decode to the same value.
func FuzzScrubberJSONClean(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"token":"x"}`, `{"\u0074oken":"x"}`, `{"a":"s3cr3t-value"}`,
		`{"a":"s3cr3t\u002dvalue"}`, `["x\n",{"My_Password":1}]`, `{"k":"abc\/def"}`,
	} {
		f.Add([]byte(s))
	}
	sc := NewScrubber([]string{"s3cr3t-value", "abc/def"})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !sc.clean(raw) || !json.Valid(raw) {
			return
		}
		var fast, full any
		if err := decodeNumbers(sc.JSON(raw), &fast); err != nil {
			t.Fatalf("compact path of %q: %v", raw, err)
		}
		if err := decodeNumbers(sc.fullJSON(raw), &full); err != nil {
			t.Fatalf("full pass of %q: %v", raw, err)
		}
		if !reflect.DeepEqual(fast, full) {
			t.Fatalf("%q: compact path %v, full pass %v", raw, fast, full)
		}
	})
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
