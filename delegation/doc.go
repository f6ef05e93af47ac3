// Package delegation turns sibling agents' MCP tools into model tools and
// runs the model's tool calls through the pool: stable namespaced names,
// bounded concurrent fan-out, the delegation chain in _meta, and failures
// rendered as tool results a model can act on.
package delegation
