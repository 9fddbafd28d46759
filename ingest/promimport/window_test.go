package promimport

import (
	"testing"
	"time"
)

func TestSplitWindow(t *testing.T) {
	t0 := time.Unix(1_795_824_000, 0).UTC()
	tests := []struct {
		name      string
		span      time.Duration
		step      time.Duration
		maxPoints int
		windows   int
	}{
		{"single point", 0, 30 * time.Second, 11000, 1},
		{"fits exactly", 10999 * 30 * time.Second, 30 * time.Second, 11000, 1},
		{"one past the limit", 11000 * 30 * time.Second, 30 * time.Second, 11000, 2},
		{"end off the grid", 95 * time.Second, 30 * time.Second, 2, 2},
		{"small chunks", 4 * time.Hour, 60 * time.Second, 50, 5},
		{"one point per call", 5 * time.Minute, time.Minute, 1, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := splitWindow(t0, t0.Add(tt.span), tt.step, tt.maxPoints)
			if len(ws) != tt.windows {
				t.Fatalf("got %d windows, want %d: %v", len(ws), tt.windows, ws)
			}
			// The windows' grid points must be exactly the full range's.
			var got []time.Time
			for _, w := range ws {
				n := 0
				for p := w.start; !p.After(w.end); p = p.Add(tt.step) {
					got = append(got, p)
					n++
				}
				if n > tt.maxPoints {
					t.Errorf("window %v has %d points, limit %d", w, n, tt.maxPoints)
				}
			}
			var want []time.Time
			for p := t0; !p.After(t0.Add(tt.span)); p = p.Add(tt.step) {
				want = append(want, p)
			}
			if len(got) != len(want) {
				t.Fatalf("windows evaluate %d points, want %d", len(got), len(want))
			}
			for i := range want {
				if !got[i].Equal(want[i]) {
					t.Fatalf("point %d = %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}
