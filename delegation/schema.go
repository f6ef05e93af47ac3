package delegation

// An MCP tool's inputSchema is a JSON Schema (2020-12 by default). Chat APIs
// take it as a function's "parameters", but are stricter: the root must be an
// object schema (OpenAI rejects a missing "type" or "properties" on some
// models), and several reject meta keywords such as "$schema" or "$id"
// anywhere. Parameters keeps everything else as the server wrote it, so the
// model sees the same constraints the server will validate.

import (
	"encoding/json"
	"fmt"
)

// droppedKeywords are schema keywords removed wherever a schema appears:
// they describe the document, not the value, and providers reject them.
var droppedKeywords = []string{"$schema", "$id", "$comment"}

// Parameters maps an MCP tool input schema (any value that marshals to a
// JSON Schema object, nil meaning "no arguments") to the "parameters" of a
// chat API function. The result is an object schema with a "properties"
// member, without the keywords providers reject. Its keys are sorted, so the
// same schema always yields the same bytes.
func Parameters(inputSchema any) (json.RawMessage, error) {
	root := map[string]any{}
	if inputSchema != nil {
		b, err := json.Marshal(inputSchema)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		switch v := v.(type) {
		case nil:
		case map[string]any:
			root = v
		default:
			return nil, fmt.Errorf("input schema is a JSON %T, not an object", v)
		}
	}
	if t, ok := root["type"]; ok && t != "object" {
		return nil, fmt.Errorf("input schema has type %v; a tool's arguments must be an object", t)
	}
	root["type"] = "object"
	if _, ok := root["properties"]; !ok {
		root["properties"] = map[string]any{}
	}
	clean(root)
	return json.Marshal(root)
}

// clean removes droppedKeywords from schema s and from every subschema,
// recursing only through keywords whose values are schemas, so that a
// property that happens to be called "$id" survives.
func clean(s map[string]any) {
	for _, k := range droppedKeywords {
		delete(s, k)
	}
	for k, v := range s {
		switch k {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			if m, ok := v.(map[string]any); ok {
				for _, sub := range m {
					cleanAny(sub)
				}
			}
		case "items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems",
			"propertyNames", "contains", "not", "if", "then", "else":
			cleanAny(v)
		case "allOf", "anyOf", "oneOf", "prefixItems":
			if a, ok := v.([]any); ok {
				for _, sub := range a {
					cleanAny(sub)
				}
			}
		}
	}
}

func cleanAny(v any) {
	switch v := v.(type) {
	case map[string]any:
		clean(v)
	case []any: // draft-04 style "items": [schemas]
		for _, sub := range v {
			cleanAny(sub)
		}
	}
}
