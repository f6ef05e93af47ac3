package mcpconfig

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "EMPTY": "", "DOLLAR": "$${A}"}
	lookup := func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
	tests := []struct {
		in, want, err string
	}{
		{in: "", want: ""},
		{in: "plain", want: "plain"},
		{in: "${A}", want: "x"},
		{in: "a${A}b${A}c", want: "axbxc"},
		{in: "${env:A}", want: "x"},
		{in: "${A:-d}", want: "x"},
		{in: "${UNSET:-d}", want: "d"},
		{in: "${UNSET:-}", want: ""},
		{in: "${EMPTY:-d}", want: "d"}, // as in sh: empty takes the default
		{in: "${EMPTY}", want: ""},
		{in: "${env:UNSET:-d e}", want: "d e"},
		{in: "${UNSET:-a:-b}", want: "a:-b"},
		{in: "$$", want: "$"},
		{in: "$${A}", want: "${A}"},
		{in: "$$$${A}", want: "$${A}"},
		{in: "$A $", want: "$A $"},
		{in: "${DOLLAR}", want: "$${A}"}, // values are not expanded again
		{in: "${UNSET}", err: "undefined variable ${UNSET} (no default)"},
		{in: "${env:UNSET}", err: "undefined variable ${env:UNSET} (no default)"},
		{in: "${", err: `unterminated ${ in "${"`},
		{in: "${A", err: `unterminated ${ in "${A"`},
		{in: "${}", err: "invalid variable reference ${}: want ${VAR}, ${VAR:-default} or ${env:VAR}, where VAR is letters, digits and _ and does not start with a digit"},
		{in: "${A B}", err: "invalid variable reference ${A B}: want ${VAR}, ${VAR:-default} or ${env:VAR}, where VAR is letters, digits and _ and does not start with a digit"},
		{in: "${input:key}", err: "${input:key} is not supported: input variables need an interactive prompt and Switchboard runs headless; use ${env:VAR} or ${VAR}"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, lookup)
		switch {
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("expand(%q) = %q, %v; want error %s", tt.in, got, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
