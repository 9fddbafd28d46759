package promimport

import "time"

// MaxPointsPerSeries is Prometheus' limit on points per series in one
// query_range answer ("exceeded maximum resolution of 11,000 points per
// timeseries").
const MaxPointsPerSeries = 11_000

// window is one query_range call's [start, end], both evaluated.
type window struct{ start, end time.Time }

// splitWindow cuts [from, to] into windows of at most maxPoints evaluation
// steps each. Every window starts on the grid from + k·step and the next
// one starts one step after the previous end, so the calls together
// evaluate exactly the points one unlimited call would: no gap, no overlap.
func splitWindow(from, to time.Time, step time.Duration, maxPoints int) []window {
	if maxPoints < 1 {
		maxPoints = 1
	}
	span := time.Duration(maxPoints-1) * step
	var ws []window
	for start := from; !start.After(to); {
		end := start.Add(span)
		if end.After(to) {
			end = to
		}
		ws = append(ws, window{start, end})
		start = end.Add(step)
		// end may have been clamped to to, off the grid; the loop then stops
		// because end+step > to.
	}
	return ws
}
