package delegation

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

func TestParameters(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"nil means no arguments", nil, `{"properties":{},"type":"object"}`},
		{"missing type and properties", map[string]any{}, `{"properties":{},"type":"object"}`},
		{
			"meta keywords dropped at every level, a property named $id kept",
			json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"urn:x","type":"object",
				"properties":{"$id":{"type":"string","$comment":"c"},"tags":{"type":"array","items":{"$schema":"x","type":"string"}}},
				"required":["$id"],"$defs":{"d":{"$id":"urn:d","type":"integer"}},"anyOf":[{"$schema":"x"}]}`),
			`{"$defs":{"d":{"type":"integer"}},"anyOf":[{}],"properties":{"$id":{"type":"string"},"tags":{"items":{"type":"string"},"type":"array"}},"required":["$id"],"type":"object"}`,
		},
		{
			"a jsonschema.Schema as a server built it",
			&jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"text": {Type: "string", Description: "the note"}}, Required: []string{"text"}},
			`{"properties":{"text":{"description":"the note","type":"string"}},"required":["text"],"type":"object"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parameters(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Parameters:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestParametersRejectsNonObjects(t *testing.T) {
	for _, in := range []any{
		json.RawMessage(`{"type":"array"}`),
		json.RawMessage(`[1,2]`),
		json.RawMessage(`"string"`),
		json.RawMessage(`{`),
	} {
		if got, err := Parameters(in); err == nil {
			t.Errorf("Parameters(%s) = %s, want an error", in, got)
		}
	}
}
