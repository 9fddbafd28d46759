package chstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// keyChunks keeps every key, in order, and no list's literal text over
// anListBytes unless a single key is longer than that.
func TestKeyChunks(t *testing.T) {
	long := strings.Repeat("x", anListBytes)
	var many []string
	for i := 0; i < 300_000; i++ {
		many = append(many, fmt.Sprintf(`k'\%07d`, i)) // 11 bytes, 26 escaped with separators
	}
	for _, tt := range []struct {
		name string
		keys []string
		want int
	}{
		{"none", nil, 0},
		{"one", []string{"a"}, 1},
		{"long key alone", []string{"a", long, "b"}, 3},
		{"many", many, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := keyChunks(tt.keys)
			if len(got) != tt.want {
				t.Fatalf("%d lists, want %d", len(got), tt.want)
			}
			var all []string
			for _, c := range got {
				size := 0
				for _, k := range c {
					size += 2*len(k) + 4
				}
				if size > anListBytes && len(c) > 1 {
					t.Errorf("a list of %d keys is %d bytes", len(c), size)
				}
				all = append(all, c...)
			}
			if !slices.Equal(all, tt.keys) {
				t.Error("keys lost or reordered")
			}
		})
	}
}
