package config

import (
	"fmt"
	"time"
)

// Analyze configures the analyzers of `kvtrail analyze` (see
// kvtrail.example.yaml and docs/analyzers.md for what each one means).
type Analyze struct {
	// LinkMargin widens the engine/transfer read around the window so a
	// request is linked to lines logged after the window ended.
	LinkMargin time.Duration `mapstructure:"link_margin" yaml:"link_margin"`
	// SpeedMinUncachedTokens: smallest uncached prompt impossible_speed judges.
	SpeedMinUncachedTokens uint64 `mapstructure:"speed_min_uncached_tokens" yaml:"speed_min_uncached_tokens"`
	// SpeedMADs: robust sigmas below the per-node fit that are impossible.
	SpeedMADs float64 `mapstructure:"speed_mads" yaml:"speed_mads"`
	// SpeedMaxRatio: and at most this fraction of the fitted TTFT.
	SpeedMaxRatio float64 `mapstructure:"speed_max_ratio" yaml:"speed_max_ratio"`
	// SpeedSample: requests per node used for the fit.
	SpeedSample int `mapstructure:"speed_sample" yaml:"speed_sample"`
	// SpeedMinSamples: below this many normal requests a node is not fitted.
	SpeedMinSamples int `mapstructure:"speed_min_samples" yaml:"speed_min_samples"`
	// AbortReuseWindow: how long after a decode-side abort a late transfer
	// write is still considered able to land.
	AbortReuseWindow time.Duration `mapstructure:"abort_reuse_window" yaml:"abort_reuse_window"`
	// DeferredRelease: off, on or unknown (SGLang decode keeps aborted pages
	// until the transfer ends when on).
	DeferredRelease string `mapstructure:"deferred_release" yaml:"deferred_release"`
	// GapThreshold: a node silent this long while others log is a gap.
	GapThreshold time.Duration `mapstructure:"gap_threshold" yaml:"gap_threshold"`
	// SliceRequests: a window with more gateway responses is analyzed in
	// slices of about this many (memory stays bounded); -1 reads any
	// window whole.
	SliceRequests int `mapstructure:"slice_requests" yaml:"slice_requests"`
	// MemoryLimitMB is the soft memory limit (Go's GOMEMLIMIT) of a
	// `kvtrail analyze` process, in MiB: the garbage collector works harder
	// as the process nears it, instead of letting the heap double its live
	// size between collections. The live heap of default slices is 200–350
	// MB; once the live heap comes within a third of the limit the limit
	// follows it (live plus half, internal/memlimit), as a fixed limit
	// below the live heap has the collector run without pause; under it
	// the limit is the collector's only trigger. 0 sets none (the
	// GOMEMLIMIT environment variable, if set, wins, and is fixed).
	MemoryLimitMB int `mapstructure:"memory_limit_mb" yaml:"memory_limit_mb"`
	// ReplayWorkers: how many decode nodes the allocator replay streams at
	// once (each holds its lanes' requests in flight); 0 means one per CPU.
	ReplayWorkers int `mapstructure:"replay_workers" yaml:"replay_workers"`
}

func defaultAnalyze() Analyze {
	return Analyze{
		LinkMargin:             15 * time.Minute,
		SpeedMinUncachedTokens: 8192,
		SpeedMADs:              6,
		SpeedMaxRatio:          0.25,
		SpeedSample:            2000,
		SpeedMinSamples:        30,
		AbortReuseWindow:       time.Minute,
		DeferredRelease:        "unknown",
		GapThreshold:           10 * time.Minute,
		SliceRequests:          100_000,
		MemoryLimitMB:          512,
	}
}

// validate returns one error per bad value, each naming its key.
func (c Analyze) validate() []error {
	var errs []error
	if c.LinkMargin < 0 || c.LinkMargin > 24*time.Hour {
		errs = append(errs, fmt.Errorf("analyze.link_margin: must be between 0 and 24h, got %s", c.LinkMargin))
	}
	if c.SpeedMADs <= 0 {
		errs = append(errs, fmt.Errorf("analyze.speed_mads: must be positive, got %v", c.SpeedMADs))
	}
	if c.SpeedMaxRatio <= 0 || c.SpeedMaxRatio >= 1 {
		errs = append(errs, fmt.Errorf("analyze.speed_max_ratio: must be in (0, 1), got %v", c.SpeedMaxRatio))
	}
	if c.SpeedSample < 10 {
		errs = append(errs, fmt.Errorf("analyze.speed_sample: must be at least 10, got %d", c.SpeedSample))
	}
	if c.SpeedMinSamples < 3 {
		errs = append(errs, fmt.Errorf("analyze.speed_min_samples: must be at least 3, got %d", c.SpeedMinSamples))
	}
	if c.AbortReuseWindow <= 0 || c.AbortReuseWindow > time.Hour {
		errs = append(errs, fmt.Errorf("analyze.abort_reuse_window: must be between 0 and 1h, got %s", c.AbortReuseWindow))
	}
	switch c.DeferredRelease {
	case "off", "on", "unknown":
	default:
		errs = append(errs, fmt.Errorf("analyze.deferred_release: must be off, on or unknown, got %q", c.DeferredRelease))
	}
	if c.GapThreshold < 0 {
		errs = append(errs, fmt.Errorf("analyze.gap_threshold: must not be negative (0 turns gap detection off), got %s", c.GapThreshold))
	}
	if c.SliceRequests == 0 || c.SliceRequests < -1 {
		errs = append(errs, fmt.Errorf("analyze.slice_requests: must be positive, or -1 to read every window whole, got %d", c.SliceRequests))
	}
	if c.ReplayWorkers < 0 {
		errs = append(errs, fmt.Errorf("analyze.replay_workers: must not be negative (0 is one per CPU), got %d", c.ReplayWorkers))
	}
	if c.MemoryLimitMB < 0 {
		errs = append(errs, fmt.Errorf("analyze.memory_limit_mb: must not be negative (0 sets no limit), got %d", c.MemoryLimitMB))
	}
	return errs
}
