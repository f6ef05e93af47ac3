// Package kubernetes holds no code: its directory is the Kubernetes
// deployment of Switchboard (a kustomize base and an example overlay, see
// docs/DEPLOY.md), and its test decodes every manifest strictly into
// the k8s.io/api types and checks what a cluster would only show at run
// time: probes on the agent's paths and port, a termination grace longer
// than the drain, selectors that select, secrets by reference, pinned
// images, and oracle's tools/mcp.json naming its siblings' Services.
package kubernetes
