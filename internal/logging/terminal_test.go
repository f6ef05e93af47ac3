package logging_test

import (
	"testing"

	"github.com/switchboard-run/switchboard/internal/logging"
)

// TestPrintable: what a hostile server sends to clear the screen, set the
// window title, overwrite a line or reorder text reaches the terminal as
// inert text, byte for byte as listed; newlines and tabs are kept by
// Printable and made visible by PrintableLine.
func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, multi, line string }{
		{"plain text, é ✓", "plain text, é ✓", "plain text, é ✓"},
		{"a\nb\tc", "a\nb\tc", `a\nb\tc`},
		{"\x1b[2J\x1b[HSession expired", "Session expired", "Session expired"},
		{"\x1b[31mRED\x1b[0m", "RED", "RED"},
		{"\x1b]0;title\x07after", "after", "after"},
		{"\x1b]8;;https://evil.test/\x1b\\link\x1b]8;;\x1b\\", "link", "link"},
		{"\x1bPdcs\x1b\\x", "x", "x"},
		{"\x1bcreset\x1b(Bx", "resetx", "resetx"},
		{"over\rwrite", `over\rwrite`, `over\rwrite`},
		{"bell\x07nul\x00del\x7f", `bell\anul\x00del\x7f`, `bell\anul\x00del\x7f`},
		{"c1 \u009b2J \u0085", `c1 \u009b2J \u0085`, `c1 \u009b2J \u0085`},
		{"bidi \u202egnp.exe\u202c \u2066x\u2069 \u200f", `bidi \u202egnp.exe\u202c \u2066x\u2069 \u200f`, `bidi \u202egnp.exe\u202c \u2066x\u2069 \u200f`},
		{"sep\u2028x", `sep\u2028x`, `sep\u2028x`},
		{"bad \xff utf8", `bad \xff utf8`, `bad \xff utf8`},
		{"unterminated \x1b]0;title", "unterminated ", "unterminated "},
		{"broken \x1b[2\nnext", "broken \nnext", `broken \nnext`},
		{"trailing \x1b", "trailing ", "trailing "},
	} {
		if got := logging.Printable(c.in); got != c.multi {
			t.Errorf("Printable(%q) = %q, want %q", c.in, got, c.multi)
		}
		if got := logging.PrintableLine(c.in); got != c.line {
			t.Errorf("PrintableLine(%q) = %q, want %q", c.in, got, c.line)
		}
	}
}

// FuzzPrintable: whatever the input, the output holds no byte a terminal
// acts on (ESC, another C0 control but newline and tab, DEL, a C1 control,
// a bidi control) and is valid UTF-8.
func FuzzPrintable(f *testing.F) {
	f.Add("\x1b[2J\x1b]0;t\x07\r\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{logging.Printable(s), logging.PrintableLine(s)} {
			for _, r := range out {
				if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c {
					t.Fatalf("Printable(%q) = %q: holds %U", s, out, r)
				}
			}
		}
		for _, r := range logging.PrintableLine(s) {
			if r == '\n' || r == '\t' {
				t.Fatalf("PrintableLine(%q) holds %U", s, r)
			}
		}
	})
}
