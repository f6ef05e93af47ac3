package builtin

import (
	"strings"
	"testing"
)

// BenchmarkRespondLongTask measures a pathological task: 2,000 steps with
// numbers and dates. Run: go test -bench RespondLongTask ./runtime/builtin/
func BenchmarkRespondLongTask(b *testing.B) {
	tools := internalTools(b, packratSchemas, abacusSchemas)
	task := strings.Repeat("remember that 12 apples cost 3 dollars on 2025-01-01 and 4 days later, then what is 12*(3+4)? ", 2000)
	req := &chatRequest{Messages: []chatMessage{{Role: "user", Content: content(task)}}}
	for b.Loop() {
		respond(req, tools, toolChoice{mode: "auto"})
	}
}
