package delegation

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var providerName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 80)
	for _, tc := range []struct {
		server, tool, want string
	}{
		{"packrat", "store_note", "packrat__store_note"},
		{"abacus", "convert-units", "abacus__convert-units"},
		{"my.server", "files/read", "my_server__files_read"},
		{"café", "naïve tool", "caf___na_ve_tool"},
		{"", "", "____"}, // an empty part becomes "_"
		{"a", long, "a__" + long[:64-3-9] + "_" + pairHash("a", long)},
	} {
		got := ToolName(tc.server, tc.tool)
		if got != tc.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
		}
		if !providerName.MatchString(got) || !ValidName(got) {
			t.Errorf("ToolName(%q, %q) = %q: not a valid provider name", tc.server, tc.tool, got)
		}
	}
}

func TestToolNameLongNamesStayDistinct(t *testing.T) {
	prefix := strings.Repeat("p", 70)
	a, b := ToolName("srv", prefix+"_one"), ToolName("srv", prefix+"_two")
	if a == b {
		t.Fatalf("two long names that differ past the cut share the name %q", a)
	}
	for _, n := range []string{a, b} {
		if len(n) != MaxNameLen {
			t.Errorf("len(%q) = %d, want %d", n, len(n), MaxNameLen)
		}
	}
}

func TestAssignNamesCollisions(t *testing.T) {
	pairs := []pair{
		{"a.b", "c"},  // sanitizes to a_b__c, colliding with the exact one below
		{"a_b", "c"},  // exact: keeps a_b__c
		{"x", "y__z"}, // exact x__y__z
		{"x__y", "z"}, // exact x__y__z too: the smaller server wins
		{"packrat", "t"},
		{"packrat", "t"}, // listed twice: one name
	}
	got := assignNames(pairs)
	want := map[pair]string{
		{"a_b", "c"}:     "a_b__c",
		{"a.b", "c"}:     "a_b__c_" + pairHash("a.b", "c"),
		{"x", "y__z"}:    "x__y__z",
		{"x__y", "z"}:    "x__y__z_" + pairHash("x__y", "z"),
		{"packrat", "t"}: "packrat__t",
	}
	if len(got) != len(want) {
		t.Fatalf("assignNames gave %d names, want %d: %v", len(got), len(want), got)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("name of %v = %q, want %q", p, got[p], w)
		}
	}
}

// TestAssignNamesProperties checks, over many random sets of awkward names,
// that names are valid, distinct, and independent of input order.
func TestAssignNamesProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "_", "__", ".", "-", "é", "/", strings.Repeat("q", 40)}
	word := func() string {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := range 200 {
		var pairs []pair
		for range 2 + r.IntN(12) {
			pairs = append(pairs, pair{word(), word()})
		}
		names := assignNames(pairs)
		seen := map[string]pair{}
		for p, n := range names {
			if !ValidName(n) {
				t.Fatalf("set %d: %v named %q, not a valid name", i, p, n)
			}
			if q, dup := seen[n]; dup {
				t.Fatalf("set %d: %v and %v both named %q", i, p, q, n)
			}
			seen[n] = p
		}
		shuffled := slices.Clone(pairs)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := assignNames(shuffled)
		if fmt.Sprint(again) != fmt.Sprint(names) {
			t.Fatalf("set %d: names depend on input order:\n%v\n%v", i, names, again)
		}
	}
}
