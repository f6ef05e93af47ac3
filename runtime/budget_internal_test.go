package runtime

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShares(t *testing.T) {
	for _, tc := range []struct {
		sizes       []int
		each, total int
		want        []int
	}{
		{[]int{10, 20}, 100, 1000, []int{10, 20}},             // all fit
		{[]int{500, 10, 500}, 1000, 610, []int{300, 10, 300}}, // the small one whole, the rest evenly
		{[]int{5000}, 100, 1000, []int{100}},                  // one result's bound
		{[]int{900, 50, 100}, 1000, 300, []int{150, 50, 100}}, // what the small ones leave goes to the large
		{[]int{7, 7, 7}, 100, 10, []int{3, 3, 4}},             // never above the total
		{nil, 100, 1000, []int{}},
	} {
		got := shares(tc.sizes, tc.each, tc.total)
		if !slices.Equal(got, tc.want) {
			t.Errorf("shares(%v, %d, %d) = %v, want %v", tc.sizes, tc.each, tc.total, got, tc.want)
		}
		sum := 0
		for _, s := range got {
			sum += s
		}
		if sum > tc.total {
			t.Errorf("shares(%v, %d, %d) sum to %d", tc.sizes, tc.each, tc.total, sum)
		}
	}
}

// FuzzCut: a cut of valid UTF-8 is a valid prefix no longer than asked,
// and at most three bytes shorter (a rune is at most four).
func FuzzCut(f *testing.F) {
	f.Add("héllo wörld 日本語 🎉", 5)
	f.Add("🎉🎉", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if !utf8.ValidString(s) || n < 0 {
			return
		}
		got := cut(s, n)
		if !strings.HasPrefix(s, got) || !utf8.ValidString(got) || len(got) > max(n, 0) && len(got) != len(s) {
			t.Fatalf("cut(%q, %d) = %q", s, n, got)
		}
		if n < len(s) && len(got) < n-3 {
			t.Fatalf("cut(%q, %d) = %q: cut too much", s, n, got)
		}
	})
}

func TestPagers(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   []string
	}{
		{`{"type":"object","properties":{"path":{},"offset":{},"limit":{}}}`, []string{"offset", "limit"}},
		{`{"type":"object","properties":{"query":{},"pageToken":{},"maxResults":{}}}`, []string{"pageToken", "maxResults"}},
		{`{"type":"object","properties":{"cursor":{"type":"string"}}}`, []string{"cursor"}},
		{`{"type":"object","properties":{"text":{}}}`, nil},
		{`{"type":"object"}`, nil},
	} {
		if got := pagers(json.RawMessage(tc.schema)); !slices.Equal(got, tc.want) {
			t.Errorf("pagers(%s) = %q, want %q", tc.schema, got, tc.want)
		}
	}
}

func TestGroup(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 65536: "65,536", 1048576: "1,048,576", 10420225: "10,420,225", -1500: "-1,500"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}
