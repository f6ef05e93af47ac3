// Package toolschema builds the input schemas of the bundled agents' tools.
package toolschema

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// For infers the JSON schema of T from its json and jsonschema tags
// and lets edit add what tags cannot say (enums, bounds, defaults). The
// model picks and fills tools from these schemas, so they are worth stating.
func For[T any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("schema for %T: %v", *new(T), err))
	}
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

// RawJSON marshals v, which must marshal.
func RawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }
