package analyze

import (
	"cmp"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// opForward is the forward order as the replay compared it before sortOps
// (a comparison for slices.SortStableFunc), the reference here.
func opForward(a, b op) int {
	if a.at != b.at {
		return cmp.Compare(a.at, b.at)
	}
	if a.kind != b.kind {
		return cmp.Compare(b.kind, a.kind)
	}
	return cmp.Compare(a.line, b.line)
}

// TestSortOpsIsStable: sortOps orders a lane's operations exactly as a
// stable sort by the same order does, ties (the same instant, kind and
// line: two requests glued in one line) in their order before the sort,
// whether or not a sorted head is given and in both orders.
func TestSortOpsIsStable(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var buf []op
	for trial := range 400 {
		n := rng.Intn(300)
		if trial%50 == 0 {
			n = 5000 + rng.Intn(5000) // several merge passes
		}
		ops := make([]op, n)
		for i := range ops {
			// Few instants, kinds and lines: ties are common.
			ops[i] = op{at: int64(rng.Intn(6))*int64(time.Second) + int64(rng.Intn(3))*int64(time.Millisecond),
				line: uint64(rng.Intn(4)), ri: int32(i), kind: uint8(rng.Intn(3))}
		}
		for _, reversed := range []bool{false, true} {
			order := opForward
			if reversed {
				order = opReversed
			}
			sorted := 0
			if n > 0 && rng.Intn(2) == 0 {
				sorted = rng.Intn(n + 1)
				slices.SortStableFunc(ops[:sorted], order)
			}
			want := slices.Clone(ops)
			slices.SortStableFunc(want, order)
			got := slices.Clone(ops)
			sortOps(got, sorted, reversed, &buf)
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d (%d ops, %d sorted, reversed %v): sortOps differs from a stable sort", trial, n, sorted, reversed)
			}
		}
	}
}
