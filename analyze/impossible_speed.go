package analyze

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/kvtrail/kvtrail/domain"
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
	key  string
	u, t float64
	h    uint64
}

// newSpeedPoint makes a point; hashed gives it its sample hash, which only
// the fit's pass reads.
func newSpeedPoint(key string, prompt, cached uint64, ttft float64, hashed bool) speedPoint {
	p := speedPoint{key: key, u: float64(prompt - cached), t: ttft}
	if hashed {
		h := sha256.Sum256([]byte(key))
		p.h = binary.BigEndian.Uint64(h[:8])
	}
	return p
}

// sampleOrder orders points by hash, then key: the fit's sample is a
// node's lowest points in this order.
func sampleOrder(a, b speedPoint) int {
	if c := cmp.Compare(a.h, b.h); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// Analyze implements Analyzer.
func (a *ImpossibleSpeed) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	return runPass(ctx, a.newPass(), d)
}

// newPass: the fit needs every request of the window, so it judges after
// the slices: on the window's requests in memory when it was read whole,
// else on their saved facts, grouped by the server and read once, never
// held. The fit's sample is taken as the slices go by (each slice's own
// requests are the rows the run saves or adopted), bounded per node.
func (a *ImpossibleSpeed) newPass() pass { return &speedPass{a: a, nodes: map[string]*speedNode{}} }

// speedPass gathers each node's sample from the slices, then judges.
// sampled says this pass saw the slices: a job's finishing worker
// (worker.go) sees none of them, and its pass takes the sample from the
// saved rows instead.
type speedPass struct {
	a       *ImpossibleSpeed
	nodes   map[string]*speedNode
	sampled bool
}

func (p *speedPass) slice(_ context.Context, d *Dataset) ([]Finding, error) {
	if d.complete {
		return nil, nil // read whole: finish has every request
	}
	p.sampled = true
	p.a.factPoints(d, true, func(node string, pt speedPoint) { p.a.sample(p.nodes, node, pt) })
	return nil, nil
}

func (p *speedPass) finish(ctx context.Context, d *Dataset) ([]Finding, error) {
	if d.complete || !p.sampled {
		return p.a.judge(ctx, d, nil)
	}
	return p.a.judge(ctx, d, p.nodes)
}

// speedNode is one prefill node's sample and fit.
type speedNode struct {
	n      int // the node's points
	sample []speedPoint
	// full: sample was cut to the Sample lowest points so far, of which
	// top is the highest; a later point above it cannot be in the sample.
	full bool
	top  speedPoint
	fit  Fit
	ok   bool
}

// add counts p and keeps it while it can be among the node's sample
// lowest points (all of them when sample is 0), cutting the kept points
// back to the lowest sample as they reach four times that.
func (sn *speedNode) add(p speedPoint, sample int) {
	sn.n++
	if sn.full && sampleOrder(p, sn.top) > 0 {
		return // sample points already seen come before it
	}
	sn.sample = append(sn.sample, p)
	if sample > 0 && len(sn.sample) >= 4*sample {
		sn.sample = lowestHashes(sn.sample, sample)
		sn.full, sn.top = true, sn.sample[len(sn.sample)-1]
	}
}

// points calls fn for every point of the window, in time order when read
// whole; hashed: with their sample hashes.
func (a *ImpossibleSpeed) points(ctx context.Context, d *Dataset, hashed bool, fn func(node string, p speedPoint)) error {
	if d.complete {
		a.factPoints(d, hashed, fn)
		return nil
	}
	return d.DB.ScanSpeedPoints(ctx, d.readVersion(), d.Window.From, d.Window.To, savedPoints(d, hashed, fn))
}

// suspects calls fn for the points that may lie under their node's bound
// (at least every one that does): when the window was read in slices the
// server tests the bounds as it reads the saved facts, so only those
// points reach kvtrail.
func (a *ImpossibleSpeed) suspects(ctx context.Context, d *Dataset, b domain.SpeedBounds, fn func(node string, p speedPoint)) error {
	if d.complete {
		a.factPoints(d, false, fn)
		return nil
	}
	return d.DB.ScanSpeedSuspects(ctx, d.readVersion(), d.Window.From, d.Window.To, b, savedPoints(d, false, fn))
}

// savedPoints turns the saved facts' speed points into fn's, leaving out
// those the fit does not judge (as factPoints does).
func savedPoints(d *Dataset, hashed bool, fn func(node string, p speedPoint)) func(domain.SpeedPoint) error {
	return func(sp domain.SpeedPoint) error {
		prompt := max(sp.Prompt, sp.DecodePrompt)
		if sp.Status != 200 || sp.TTFTMs <= 0 || sp.PrefillNode == "" || !d.Window.Contains(sp.TS) || sp.Cached > prompt {
			return nil
		}
		fn(sp.PrefillNode, newSpeedPoint(sp.Key, prompt, sp.Cached, sp.TTFTMs, hashed))
		return nil
	}
}

// factPoints calls fn for the points of d's own requests in memory.
func (a *ImpossibleSpeed) factPoints(d *Dataset, hashed bool, fn func(node string, p speedPoint)) {
	for _, f := range d.Facts {
		if f.GW == nil || f.GW.Status != 200 || f.GW.TTFTMs <= 0 || f.Prefill == nil || (!d.complete && !d.Window.Contains(f.TS)) {
			continue
		}
		prompt := f.PromptTokens()
		if f.GW.Cached > prompt {
			continue
		}
		fn(f.Prefill.Node, newSpeedPoint(f.Key, prompt, f.GW.Cached, f.GW.TTFTMs, hashed))
	}
}

// sample counts p among its node's points and keeps it while it can be in
// the node's sample.
func (a *ImpossibleSpeed) sample(nodes map[string]*speedNode, node string, p speedPoint) {
	sn := nodes[node]
	if sn == nil {
		sn = &speedNode{}
		nodes[node] = sn
	}
	sn.add(p, a.Sample)
}

// judge fits each node's TTFT from a deterministic sample of its points
// (the lowest key hashes), then finds the points far below the fit. nodes
// holds the samples when the slices took them; nil: a first pass over the
// points takes them.
func (a *ImpossibleSpeed) judge(ctx context.Context, d *Dataset, nodes map[string]*speedNode) ([]Finding, error) {
	if nodes == nil {
		nodes = map[string]*speedNode{}
		if err := a.points(ctx, d, true, func(node string, p speedPoint) { a.sample(nodes, node, p) }); err != nil {
			return nil, err
		}
	}
	bounds := domain.SpeedBounds{MinUncached: a.MinUncached, Ratio: a.MaxRatio}
	at := map[string]int{} // node → its bound in bounds
	for _, node := range slices.Sorted(maps.Keys(nodes)) {
		sn := nodes[node]
		if sn.n < a.MinSamples {
			continue
		}
		if a.Sample > 0 {
			sn.sample = lowestHashes(sn.sample, a.Sample)
		}
		fit, ok := a.fit(sn.sample)
		sn.fit, sn.ok = fit, ok && fit.Slope > 0
		sn.sample = nil
		if sn.ok {
			at[node] = len(bounds.Nodes)
			bounds.Nodes = append(bounds.Nodes, domain.SpeedBound{Node: node, Intercept: fit.Intercept, Slope: fit.Slope,
				Margin: a.MADs * fit.Sigma})
		}
	}
	type suspect struct {
		node string
		p    speedPoint
	}
	var sus []suspect
	err := a.suspects(ctx, d, bounds, func(node string, p speedPoint) {
		if i, ok := at[node]; ok && bounds.Under(bounds.Nodes[i], p.u, p.t) {
			sus = append(sus, suspect{node, p})
		}
	})
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(sus))
	for i, s := range sus {
		keys[i] = s.p.key
	}
	if err := d.ensureRequests(ctx, keys, nil); err != nil {
		return nil, err
	}
	var out []Finding
	for _, s := range sus {
		f, p, node, fit := d.request(s.p.key), s.p, s.node, nodes[s.node].fit
		if f == nil {
			return nil, fmt.Errorf("impossible speed: request %s was saved but cannot be linked again", p.key)
		}
		want := fit.Predict(p.u)
		bound := want - a.MADs*fit.Sigma
		fd := f.Finding()
		fd.Severity = Medium
		if f.ClientSuccess {
			fd.Severity = High
		}
		fd.Confidence = 0.6 + 0.35*min(1, (want-p.t)/want)
		fd.Title = fmt.Sprintf("TTFT %.0f ms for %s uncached tokens on %s (fit %.0f ms)", p.t, commas(uint64(p.u)), node, want)
		fd.Explanation = fmt.Sprintf("TTFT %.0f ms for %s uncached prompt tokens (prompt %s, cached %s) on %s, whose own traffic "+
			"fits TTFT = %.1f ms + %.4f ms/token (Theil-Sen on %d of %d requests, robust sigma %.1f ms): expected %.0f ms, "+
			"lower bound %.0f ms. The prefill cannot have computed this prompt; client got %d with %s completion tokens.",
			p.t, commas(uint64(p.u)), commas(f.PromptTokens), commas(f.CachedTokens), node, fit.Intercept, fit.Slope,
			fit.N, nodes[node].n, fit.Sigma, want, max(bound, 0), f.Status, commas(f.Completion))
		fd.Details["ttft_ms"] = fmt.Sprintf("%.3f", p.t)
		fd.Details["expected_ttft_ms"] = fmt.Sprintf("%.3f", want)
		fd.Details["fit"] = fmt.Sprintf("%.4f+%.6f*u sigma=%.4f n=%d", fit.Intercept, fit.Slope, fit.Sigma, fit.N)
		out = append(out, fd)
	}
	return out, nil
}

// lowestHashes keeps the n points of lowest hash (the fit's deterministic
// sample), so a node's sample stays bounded however many points it has.
func lowestHashes(s []speedPoint, n int) []speedPoint {
	slices.SortFunc(s, sampleOrder)
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// fit uses a deterministic sample (lowest key hashes) of the node's points.
func (a *ImpossibleSpeed) fit(pts []speedPoint) (Fit, bool) {
	s := append([]speedPoint(nil), pts...)
	sort.Slice(s, func(i, j int) bool { return s[i].u < s[j].u || (s[i].u == s[j].u && s[i].h < s[j].h) })
	xs, ys := make([]float64, len(s)), make([]float64, len(s))
	for i, p := range s {
		xs[i], ys[i] = p.u, p.t
	}
	return TheilSen(xs, ys)
}
