package analyze

import (
	"math"
	"sort"
)

// Fit is a robust line y = Intercept + Slope*x with a robust scale of the
// residuals (1.4826 * MAD, the normal-consistent sigma).
type Fit struct {
	Intercept, Slope, Sigma float64
	N                       int
}

// Predict returns the fitted y at x.
func (f Fit) Predict(x float64) float64 { return f.Intercept + f.Slope*x }

// maxPairs bounds the Theil–Sen pair count (O(n²)); the points are
// thinned deterministically beyond it.
const maxPairPoints = 600

// TheilSen fits y on x with the Theil–Sen estimator (median of pairwise
// slopes, median intercept): up to 29% of the points can be arbitrarily
// wrong (the incidents we look for, queueing spikes) without moving it.
// It returns ok=false for fewer than 3 points or no spread in x.
func TheilSen(xs, ys []float64) (Fit, bool) {
	n := len(xs)
	if n < 3 || len(ys) != n {
		return Fit{}, false
	}
	px, py := xs, ys
	if n > maxPairPoints {
		step := float64(n) / maxPairPoints
		px, py = make([]float64, 0, maxPairPoints), make([]float64, 0, maxPairPoints)
		for i := 0; i < maxPairPoints; i++ {
			j := int(float64(i) * step)
			px, py = append(px, xs[j]), append(py, ys[j])
		}
	}
	var slopes []float64
	for i := range px {
		for j := i + 1; j < len(px); j++ {
			if dx := px[j] - px[i]; dx != 0 {
				slopes = append(slopes, (py[j]-py[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return Fit{}, false
	}
	slope := median(slopes)
	res := make([]float64, n)
	for i := range xs {
		res[i] = ys[i] - slope*xs[i]
	}
	icpt := median(res)
	for i := range res {
		res[i] = math.Abs(res[i] - icpt)
	}
	return Fit{Intercept: icpt, Slope: slope, Sigma: 1.4826 * median(res), N: n}, true
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
