package simulate

import (
	"runtime/debug"
	"testing"
)

// TestTightGC: a simulation collects at half the growth and restores the
// setting after; a GOGC the operator set is left alone.
func TestTightGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		name, env string
		during    int
	}{
		{"unset", "", gcPercent},
		{"operator's GOGC", "200", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.env)
			restore := TightGC()
			during := debug.SetGCPercent(-1)
			debug.SetGCPercent(during)
			restore()
			after := debug.SetGCPercent(100)
			if during != tc.during || after != 100 {
				t.Errorf("GOGC during %d, after %d; want %d and 100", during, after, tc.during)
			}
		})
	}
}
