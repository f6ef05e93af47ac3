package proxy

import (
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testSessionTTL is the studio's default session TTL (31m): continuity's
// own tests keep sessions as long as the studio would.
const testSessionTTL = 31 * time.Minute

func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
