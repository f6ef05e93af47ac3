// Package fake has a benchmark with variants for the rounds driver's test.
package fake

import "testing"

func BenchmarkFake(b *testing.B) {
	for _, v := range []string{"a", "b", "c"} {
		b.Run(v+"/x", func(b *testing.B) {
			for b.Loop() {
			}
		})
	}
}
