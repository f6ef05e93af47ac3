// Package peers measures the pool against other MCP clients, each calling
// one go-sdk server that runs in a process of its own: pooled calls, a raw
// held go-sdk session, the mark3labs/mcp-go client, and the TypeScript
// SDK's client (tsclient.mjs, run by node). It is a module of its own so
// that the main module gains none of these dependencies; see
// docs/BENCHMARKS.md for the command and the figures.
package peers
