package agentdef_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// An agent folder is an agent.json and, optionally, tools/mcp.json listing
// the MCP servers (sibling agents) it may delegate to. LoadWith takes the
// mcp.json's ${VARIABLES} from a function instead of the environment.
func ExampleLoadWith() {
	vars := map[string]string{"NOTES_URL": "http://127.0.0.1:9000"}
	def, err := agentdef.LoadWith("testdata/scribe", func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s\n", def.Name, def.Description)
	fmt.Printf("model %s, key in $%s, at most %d steps\n", def.Model.Name, def.Model.APIKeyEnv, def.MaxSteps)
	for _, s := range def.MCP.Servers {
		fmt.Printf("may delegate to %s at %s\n", s.Name, s.URL)
	}
	// Output:
	// scribe: Writes down what it is told, through its sibling notes.
	// model gpt-4o-mini, key in $SCRIBE_API_KEY, at most 4 steps
	// may delegate to notes at http://127.0.0.1:9000/mcp
}

// A bad agent.json is a *mcpconfig.ConfigError, the same type as a bad
// tools/mcp.json, naming the file, the field and the value at fault.
func ExampleLoad_error() {
	_, err := agentdef.Load("testdata/broken")
	fmt.Println(err)
	var ce *mcpconfig.ConfigError
	if errors.As(err, &ce) {
		fmt.Printf("field %q, value %s\n", ce.Field, ce.Value)
	}
	// Output:
	// testdata/broken/agent.json: field "max_steps": want an integer from 1 to 100, got 0
	// field "max_steps", value 0
}
