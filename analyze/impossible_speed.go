package analyze

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
)

// ImpossibleSpeed finds requests whose time to first token is far below
// what their serving prefill node needs for that many uncached tokens,
// judged against the node's own traffic: per node, a Theil–Sen fit of TTFT
// on uncached prompt tokens (prompt - cached, as reported to the client)
// over a deterministic sample, with a MAD-based lower bound. A prefix-cache
// hit lowers the uncached count, so it is not a finding.
type ImpossibleSpeed struct {
	MinUncached uint64  `json:"min_uncached_tokens"`
	MADs        float64 `json:"mads"`
	MaxRatio    float64 `json:"max_ratio"`
	Sample      int     `json:"sample"`
	MinSamples  int     `json:"min_samples"`
}

// Name implements Analyzer.
func (*ImpossibleSpeed) Name() string { return "impossible_speed" }

func init() {
	Register(Registration{Order: 50,
		Victims: High,
		New: func(cfg Config) Analyzer {
			return &ImpossibleSpeed{MinUncached: cfg.SpeedMinUncached, MADs: cfg.SpeedMADs, MaxRatio: cfg.SpeedMaxRatio,
				Sample: cfg.SpeedSample, MinSamples: cfg.SpeedMinSamples}
		}})
}

// Version implements Analyzer.
func (*ImpossibleSpeed) Version() string { return "1" }

// Params implements Analyzer.
func (a *ImpossibleSpeed) Params() any { return a }

type speedPoint struct {
	f    *Fact
	u, t float64
	h    uint64
}

// Analyze implements Analyzer.
func (a *ImpossibleSpeed) Analyze(_ context.Context, d *Dataset) ([]Finding, error) {
	byNode := map[string][]speedPoint{}
	for _, f := range d.Facts {
		if f.GW == nil || f.GW.Status != 200 || f.GW.TTFTMs <= 0 || f.Prefill == nil {
			continue
		}
		prompt := f.PromptTokens()
		if f.GW.Cached > prompt {
			continue
		}
		h := sha256.Sum256([]byte(f.Key))
		byNode[f.Prefill.Node] = append(byNode[f.Prefill.Node], speedPoint{f: f, u: float64(prompt - f.GW.Cached),
			t: f.GW.TTFTMs, h: binary.BigEndian.Uint64(h[:8])})
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var out []Finding
	for _, node := range nodes {
		pts := byNode[node]
		if len(pts) < a.MinSamples {
			continue
		}
		fit, ok := a.fit(pts)
		if !ok || fit.Slope <= 0 {
			continue
		}
		for _, p := range pts {
			if p.u < float64(a.MinUncached) {
				continue
			}
			want := fit.Predict(p.u)
			bound := want - a.MADs*fit.Sigma
			if p.t >= bound || p.t >= a.MaxRatio*want {
				continue
			}
			f := p.f
			fd := f.Finding()
			fd.Severity = Medium
			if f.ClientSuccess() {
				fd.Severity = High
			}
			fd.Confidence = 0.6 + 0.35*min(1, (want-p.t)/want)
			fd.Title = fmt.Sprintf("TTFT %.0f ms for %s uncached tokens on %s (fit %.0f ms)", p.t, commas(uint64(p.u)), node, want)
			fd.Explanation = fmt.Sprintf("TTFT %.0f ms for %s uncached prompt tokens (prompt %s, cached %s) on %s, whose own traffic "+
				"fits TTFT = %.1f ms + %.4f ms/token (Theil-Sen on %d of %d requests, robust sigma %.1f ms): expected %.0f ms, "+
				"lower bound %.0f ms. The prefill cannot have computed this prompt; client got %d with %s completion tokens.",
				p.t, commas(uint64(p.u)), commas(f.PromptTokens()), commas(f.GW.Cached), node, fit.Intercept, fit.Slope,
				fit.N, len(pts), fit.Sigma, want, max(bound, 0), f.Status(), commas(f.Completion()))
			fd.Details["ttft_ms"] = fmt.Sprintf("%.3f", p.t)
			fd.Details["expected_ttft_ms"] = fmt.Sprintf("%.3f", want)
			fd.Details["fit"] = fmt.Sprintf("%.4f+%.6f*u sigma=%.4f n=%d", fit.Intercept, fit.Slope, fit.Sigma, fit.N)
			out = append(out, fd)
		}
	}
	return out, nil
}

// fit uses a deterministic sample (lowest key hashes) of the node's points.
func (a *ImpossibleSpeed) fit(pts []speedPoint) (Fit, bool) {
	s := append([]speedPoint(nil), pts...)
	sort.Slice(s, func(i, j int) bool { return s[i].h < s[j].h })
	if a.Sample > 0 && len(s) > a.Sample {
		s = s[:a.Sample]
	}
	sort.Slice(s, func(i, j int) bool { return s[i].u < s[j].u || (s[i].u == s[j].u && s[i].h < s[j].h) })
	xs, ys := make([]float64, len(s)), make([]float64, len(s))
	for i, p := range s {
		xs[i], ys[i] = p.u, p.t
	}
	return TheilSen(xs, ys)
}
