package delegation

// Model tool names: providers accept ^[a-zA-Z0-9_-]{1,64}$ (OpenAI; Anthropic
// and Gemini are no wider), while MCP allows dots, slashes and 128
// characters, and two agents may offer tools of the same name. A model tool
// is therefore named <server>__<tool> with illegal characters replaced by
// '_'. A name that is too long keeps a prefix and ends in a hash of the exact
// (server, tool) pair, so it stays stable across runs and processes. When two
// pairs still land on the same name, the one whose name needed no rewriting
// keeps it (then the smaller pair in byte order), and the others get the
// hash suffix: the outcome depends only on the set of pairs, never on the
// order in which servers answered discovery.

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

const (
	// MaxNameLen is the longest model tool name providers accept.
	MaxNameLen = 64
	// nameSep joins the server and tool in a model tool name.
	nameSep = "__"
	// hashLen is the number of hex digits in a disambiguating suffix.
	hashLen = 8
)

// ValidName reports whether name is a legal model tool name
// (^[a-zA-Z0-9_-]{1,64}$).
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !legal(name[i]) {
			return false
		}
	}
	return true
}

func legal(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// sanitize replaces every byte outside [a-zA-Z0-9_-] with '_'. Multi-byte
// runes become one '_' each, not one per byte.
func sanitize(s string) string {
	if s == "" {
		return "_"
	}
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && legal(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// pairHash is a short digest of the exact (server, tool) pair.
func pairHash(server, tool string) string {
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// ToolName returns the model tool name for tool on server, without regard
// to collisions with other tools: <server>__<tool>, sanitized, and shortened
// with a hash suffix when longer than MaxNameLen. A Toolbox may give a
// colliding pair a different name; ask it, not this function, for the name
// the model sees.
func ToolName(server, tool string) string {
	name := sanitize(server) + nameSep + sanitize(tool)
	if len(name) <= MaxNameLen {
		return name
	}
	return withSuffix(name, "_"+pairHash(server, tool))
}

// withSuffix returns name cut to fit MaxNameLen with suffix appended.
func withSuffix(name, suffix string) string {
	if len(name)+len(suffix) > MaxNameLen {
		name = name[:MaxNameLen-len(suffix)]
	}
	return name + suffix
}

// pair is one (server, tool) to be named.
type pair struct{ server, tool string }

// assignNames gives each pair a distinct valid model tool name. See the
// comment at the top of this file for the rules.
func assignNames(pairs []pair) map[pair]string {
	// Each pair's plain name is computed once, not in every comparison.
	type named struct {
		pair
		name  string // ToolName(server, tool)
		exact bool   // name is server__tool, with no rewriting
	}
	sorted := make([]named, len(pairs))
	for i, p := range pairs {
		n := ToolName(p.server, p.tool)
		sorted[i] = named{p, n, n == p.server+nameSep+p.tool}
	}
	slices.SortFunc(sorted, func(a, b named) int {
		// Exact names first, so a rewritten name never displaces one that
		// needed no rewriting.
		if a.exact != b.exact {
			if a.exact {
				return -1
			}
			return 1
		}
		return cmp.Or(strings.Compare(a.server, b.server), strings.Compare(a.tool, b.tool))
	})
	sorted = slices.Compact(sorted)

	names := make(map[pair]string, len(sorted))
	taken := make(map[string]bool, len(sorted))
	var losers []pair
	for _, p := range sorted {
		if taken[p.name] {
			losers = append(losers, p.pair)
			continue
		}
		names[p.pair], taken[p.name] = p.name, true
	}
	// Losers get the hash suffix. A second collision (a hashed name equal to
	// another's) would need a hash collision or an adversarial tool name
	// that ends in a hash; a counter settles it deterministically.
	for _, p := range losers {
		base := sanitize(p.server) + nameSep + sanitize(p.tool)
		h := "_" + pairHash(p.server, p.tool)
		n := withSuffix(base, h)
		for i := 2; taken[n]; i++ {
			n = withSuffix(base, fmt.Sprintf("%s-%d", h, i))
		}
		names[p], taken[n] = n, true
	}
	return names
}
