package agentserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxToolErrorText bounds each text of a tool error the agent answers.
// go-sdk's input validation quotes the offending value whole (jsonschema's
// `maxLength: %q contains N Unicode code points`): a 4 MB argument came
// back in a 4,000,352-byte tool error, through every hop and into the
// model's context. An error needs its reason, and a glimpse of the value.
const maxToolErrorText = 2048

// boundToolErrors cuts every text of a tools/call error result to
// maxToolErrorText bytes, saying how much was left out. It is the innermost
// middleware, so that the ledger records (and a replay returns) what the
// caller got.
func boundToolErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" {
			return res, err
		}
		// A failed call is a typed nil *CallToolResult with its error.
		if ctr, ok := res.(*mcp.CallToolResult); ok && ctr != nil && ctr.IsError {
			for _, c := range ctr.Content {
				if tc, ok := c.(*mcp.TextContent); ok && len(tc.Text) > maxToolErrorText {
					tc.Text = boundText(tc.Text, maxToolErrorText)
				}
			}
		}
		return res, err
	}
}

// boundText is s cut to n bytes at a UTF-8 boundary, with a note of what
// was left out.
func boundText(s string, n int) string {
	kept := strings.ToValidUTF8(s[:n], "")
	return fmt.Sprintf("%s… (%d more bytes of this error left out)", kept, len(s)-len(kept))
}
