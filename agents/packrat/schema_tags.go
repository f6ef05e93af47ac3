package packrat

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// inputSchema infers the JSON schema of T from its json and jsonschema tags
// and lets edit add what tags cannot say (bounds, defaults). The model picks
// and fills tools from these schemas, so the bounds are worth stating.
func inputSchema[T any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("packrat: schema for %T: %v", *new(T), err))
	}
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
