package logging

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Text that another party wrote (a server's elicitation message, a tool's
// name, a tool result, a model's answer) is shown on the person's terminal
// next to switchboard's own lines. A terminal acts on what it is sent: an
// escape sequence can clear the screen, move the cursor over a line already
// printed, set the window title or colour a forged prompt, a carriage
// return can overwrite the start of a line, and a bidi override can make
// text read in another order than it is stored. So such text goes through
// Printable (or PrintableLine for what must stay on one line) first:
//
//   - escape sequences are removed whole: CSI (ESC [ … final byte), the
//     string sequences OSC, DCS, SOS, PM and APC (up to BEL or ST, or the
//     end of the text), and the short ESC sequences (ESC, intermediates,
//     final byte); what they would have done is the only thing they carry;
//   - every other control character (C0 but newline and tab, DEL, C1), the
//     bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069),
//     the line and paragraph separators (U+2028, U+2029) and each byte that
//     is not UTF-8 are made visible as a Go escape (\r, \x00, \u202e,
//     \xff), so the person sees that something was there;
//   - newline and tab are content: Printable keeps them, PrintableLine makes
//     them visible too.

// Printable returns s with its escape sequences removed and its other
// control characters made visible, newlines and tabs kept.
func Printable(s string) string { return printable(s, true) }

// PrintableLine is Printable for text that must stay on one line (a name, a
// label, one line of a listing): newlines and tabs are made visible too.
func PrintableLine(s string) string { return printable(s, false) }

const esc = 0x1b

func printable(s string, multiline bool) string {
	if isPlain(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] == esc {
			i += escapeLen(s[i:])
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case multiline && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // '\r', '\x00', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isPlain reports whether s needs no change: the common case, without an
// allocation.
func isPlain(s string, multiline bool) bool {
	for _, r := range s {
		if r == esc || r == utf8.RuneError || unsafeRune(r) && !(multiline && (r == '\n' || r == '\t')) {
			return false
		}
	}
	return true
}

// unsafeRune reports whether a terminal could act on r or show it as
// something it is not.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// escapeLen is the length of the escape sequence at the start of s (s[0]
// is ESC), per ECMA-48: an unterminated sequence runs to the end of s.
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[': // CSI: parameter bytes 0x30–0x3F, intermediates 0x20–0x2F, a final byte 0x40–0x7E
		for i := 2; i < len(s); i++ {
			if c := s[i]; c >= 0x40 && c <= 0x7e {
				return i + 1
			} else if c < 0x20 || c > 0x3f {
				return i // not a CSI byte: the sequence is broken; keep what follows
			}
		}
		return len(s)
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: up to BEL (OSC's other end) or ST (ESC \)
		for i := 2; i < len(s); i++ {
			switch {
			case s[i] == 0x07:
				return i + 1
			case s[i] == esc && i+1 < len(s) && s[i+1] == '\\':
				return i + 2
			case s[i] == 0xc2 && i+1 < len(s) && s[i+1] == 0x9c: // ST as the UTF-8 C1 character
				return i + 2
			}
		}
		return len(s)
	}
	// ESC, intermediates 0x20–0x2F, a final byte 0x30–0x7E (ESC c, ESC 7,
	// ESC ( B).
	i := 1
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}
