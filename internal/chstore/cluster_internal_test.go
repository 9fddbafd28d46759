package chstore

import (
	"slices"
	"testing"
)

// The connection order puts first replicas (and hosts of no shard) first,
// then hosts not told apart, later replicas and unreachable ones last,
// the configured order kept among equals.
func TestOrderByRank(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks []int
		want  []string
	}{
		{"already first", []int{rankFirst, rankLater, rankFirst, rankLater}, []string{"a", "c", "b", "d"}},
		{"later replica listed first", []int{rankLater, rankLater, rankFirst, rankFirst}, []string{"c", "d", "a", "b"}},
		{"first replica down", []int{rankUnreachable, rankLater, rankFirst, rankLater}, []string{"c", "b", "d", "a"}},
		{"not told apart", []int{rankLater, rankUnknown, rankUnreachable, rankUnknown}, []string{"b", "d", "a", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := orderByRank([]string{"a", "b", "c", "d"}, tc.ranks); !slices.Equal(got, tc.want) {
				t.Errorf("orderByRank = %v, want %v", got, tc.want)
			}
		})
	}
}
