// Package pool is a pooled MCP client session manager.
//
// A [Pool] keeps one go-sdk [mcp.ClientSession] per (server endpoint, caller
// identity, protocol era) and hands it to concurrent callers. It replaces a
// session the server has forgotten (HTTP 404 on a request carrying its
// Mcp-Session-Id) with exactly one re-initialization shared by every caller
// that noticed, and it retries a request at most once, and only when that
// request provably did not run on the server. Every other failure is returned
// as a typed [*Error] that keeps the server's JSON-RPC code and message.
//
// See docs/ARCHITECTURE.md for the contract in full.
package pool
