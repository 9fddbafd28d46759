package probe

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/kvtrail/kvtrail/posture"
)

// Thresholds are the distinct rejection thresholds of the fleet's PD
// prefill nodes (each node's latest boot), from posture. Nodes whose
// limits were not logged give none: a probe is never placed on a guess.
func Thresholds(f *posture.Fleet) []Threshold {
	seen := map[uint64]bool{}
	var out []Threshold
	for _, b := range f.Latest() {
		if b.RejectThreshold == 0 || seen[b.RejectThreshold] {
			continue
		}
		if b.PDMode.Value != "prefill" && !(b.PDMode.Value == UnknownMode && b.Role == "prefill") {
			continue
		}
		ctxLen := uint64(0)
		if b.ContextLen.Known() {
			ctxLen = parseU(b.ContextLen.Value)
		}
		seen[b.RejectThreshold] = true
		out = append(out, Threshold{Node: b.Node, Tokens: b.RejectThreshold, ContextLen: ctxLen})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tokens < out[j].Tokens })
	return out
}

// UnknownMode is posture's value for a mode that was not logged.
const UnknownMode = posture.UnknownValue

func parseU(s string) uint64 {
	var n uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// Scheduler runs rounds on a budget while kvtrail serves.
type Scheduler struct {
	Prober *Prober
	// PerHour is the request budget (all identities, all kinds).
	PerHour int
	// MinInterval keeps rounds apart however large the budget.
	MinInterval time.Duration
	// Thresholds returns the current thresholds (nil: short probes only).
	Thresholds func(ctx context.Context) ([]Threshold, error)
	// Save stores a round's results.
	Save    func(ctx context.Context, rs []Result) error
	Metrics *Metrics
	Log     *slog.Logger
	// OnRound, if set, sees every round's results (tests, bench).
	OnRound func([]Result)
}

// Interval is the time between rounds that keeps n-threshold rounds
// within the hourly budget.
func (s *Scheduler) Interval(n int) time.Duration {
	per := max(1, s.Prober.PlannedPerRound(n))
	iv := time.Duration(float64(time.Hour) * float64(per) / float64(max(1, s.PerHour)))
	return max(iv, s.MinInterval)
}

// Run sends rounds until ctx ends. A failed round is logged and the next
// one tries again.
func (s *Scheduler) Run(ctx context.Context) {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		var th []Threshold
		if s.Thresholds != nil {
			t, err := s.Thresholds(ctx)
			if err != nil && ctx.Err() == nil {
				log.Warn("probe thresholds unavailable; short probes only", slog.String("error", err.Error()))
			}
			th = t
		}
		rs, _ := s.Prober.Round(ctx, th)
		if ctx.Err() != nil {
			return
		}
		s.Metrics.Observe(rs)
		if s.Save != nil {
			if err := s.Save(ctx, rs); err != nil {
				log.Warn("probe results not stored", slog.String("error", err.Error()))
			}
		}
		for _, r := range rs {
			if r.Finding() {
				log.Warn("canary probe finding", slog.String("verdict", r.Verdict), slog.String("probe", r.ID),
					slog.String("identity", r.Identity), slog.Any("foreign_probes", r.ForeignProbes), slog.Int("status", r.Status))
			}
		}
		if s.OnRound != nil {
			s.OnRound(rs)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.Interval(len(th))):
		}
	}
}
