package mcpconfig

import (
	"fmt"
	"strings"
)

// Variable expansion follows what Claude Code and VS Code users already
// write, with one deliberate difference: nothing expands to an empty string
// by accident. The forms are
//
//	${VAR}            the value of VAR; an error when VAR is unset
//	${VAR:-default}   VAR's value, or default when VAR is unset or empty (as in sh)
//	${env:VAR}        VS Code's spelling of ${VAR}; ${env:VAR:-default} works too
//	$$                a literal $ (so "$${VAR}" is the literal text "${VAR}")
//
// A $ followed by anything else is literal. Expanded values are not expanded
// again. ${input:...} is refused: VS Code asks the user for those, and
// Switchboard runs headless.

// expand expands the variable references in s, looking variables up with
// lookup. Its errors are messages for a [ConfigError].
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
		case '{':
			n := strings.IndexByte(s[i+2:], '}')
			if n < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			ref, body := s[i:i+2+n+1], s[i+2:i+2+n]
			v, err := resolve(ref, body, lookup)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += len(ref)
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), nil
}

// resolve returns the value of the reference ref ("${body}").
func resolve(ref, body string, lookup func(string) (string, bool)) (string, error) {
	if strings.HasPrefix(body, "input:") {
		return "", fmt.Errorf("%s is not supported: input variables need an interactive prompt and Switchboard runs headless; use ${env:VAR} or ${VAR}", ref)
	}
	if strings.Contains(body, "${") {
		return "", fmt.Errorf("nested variable reference in %s is not supported", ref)
	}
	name, def, hasDef := strings.TrimPrefix(body, "env:"), "", false
	if i := strings.Index(name, ":-"); i >= 0 {
		name, def, hasDef = name[:i], name[i+2:], true
	}
	if !ValidVarName(name) {
		return "", fmt.Errorf("invalid variable reference %s: want ${VAR}, ${VAR:-default} or ${env:VAR}, where VAR is letters, digits and _ and does not start with a digit", ref)
	}
	v, ok := lookup(name)
	switch {
	case ok && (v != "" || !hasDef):
		return v, nil
	case hasDef:
		return def, nil
	}
	return "", fmt.Errorf("undefined variable %s (no default)", ref)
}

// ValidVarName reports whether s is a portable environment variable name.
func ValidVarName(s string) bool {
	if s == "" || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
