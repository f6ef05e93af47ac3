package pool

// A dial runs with the values of the context of the caller that needed it:
// the span its request continues, and whatever the caller keeps there for
// the session's server-to-client requests (go-sdk hands those a context
// derived from the one the session was dialed with; the agent server names
// the server that asks that way). When the caller is itself serving a
// request of a go-sdk server (an agent's ask, delegating), those values
// include what go-sdk's StreamableHTTPHandler stored about the request it
// serves, above all its protocol version; and go-sdk's client transport
// reads that same key for the MCP-Protocol-Version header of a request that
// carries no version of its own: the initialize. So an agent asked in the
// 2026-07-28 era sent its session-era initialize with
// "MCP-Protocol-Version: 2026-07-28": our agents took it for the
// sessionless era and answered -32602 (no _meta protocol version), a go-sdk
// stateful server refused the version (-32022), and every delegation to a
// pinned server, or to any server of the session era, failed. Dialed from
// `switchboard client`, whose context serves no request, the same pin
// worked.
//
// Which version a dial speaks is the pool's choice (the pin, the era
// learned for the key, or server/discover), never the incoming request's,
// so a dial does not see any value go-sdk's mcp package keeps in a context.
// What go-sdk's client puts in the context during Connect (the version of
// its server/discover) is added above dialContext and is seen as before.

import (
	"context"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkPackage is the import path of go-sdk's mcp package, whose context keys
// are all unexported types.
var sdkPackage = reflect.TypeFor[mcp.Implementation]().PkgPath()

// dialContext hides go-sdk's own context values from a dial.
type dialContext struct{ context.Context }

func (c dialContext) Value(key any) any {
	if isSDKKey(key) {
		return nil
	}
	return c.Context.Value(key)
}

// isSDKKey reports whether key is a context key of go-sdk's mcp package.
func isSDKKey(key any) bool {
	t := reflect.TypeOf(key)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == sdkPackage
}
