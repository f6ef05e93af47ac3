package observe

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

// TestUsageWireMatchesRuntime: studioapi.Usage is the wire copy of
// runtime.Usage (studioapi imports only the standard library, so it cannot
// name the runtime's type). Every field the runtime reports must arrive:
// a field added to one and not the other fails here, not silently as a
// zero on the run page.
func TestUsageWireMatchesRuntime(t *testing.T) {
	rt, wire := reflect.TypeFor[runtime.Usage](), reflect.TypeFor[studioapi.Usage]()
	if rt.NumField() != wire.NumField() {
		t.Fatalf("runtime.Usage has %d fields, studioapi.Usage %d", rt.NumField(), wire.NumField())
	}
	// Every field set to a value of its own, so a swapped tag shows too.
	var u runtime.Usage
	v := reflect.ValueOf(&u).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int:
			f.SetInt(int64(i + 1))
		case reflect.Float64:
			f.SetFloat(float64(i) + 0.5)
		default:
			t.Fatalf("runtime.Usage.%s is a %s: teach this test its value", rt.Field(i).Name, f.Kind())
		}
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var got studioapi.Usage
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding runtime.Usage %s as studioapi.Usage: %v", b, err)
	}
	gv := reflect.ValueOf(got)
	for i := range v.NumField() {
		name := rt.Field(i).Name
		if g := gv.FieldByName(name); !g.IsValid() || !reflect.DeepEqual(g.Interface(), v.Field(i).Interface()) {
			t.Errorf("studioapi.Usage.%s after the wire: %v, want %v", name, g, v.Field(i))
		}
	}
	if back, _ := json.Marshal(got); !bytes.Equal(back, b) {
		t.Errorf("studioapi.Usage encodes as %s, runtime.Usage as %s", back, b)
	}
}
