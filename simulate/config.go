package simulate

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Config selects a scenario and its overrides. Zero values of the override
// fields mean "use the scenario's default".
type Config struct {
	Scenario   string
	Seed       int64
	Scale      float64 // multiplies traffic; 1 = the scenario's nominal volume
	Days       int
	Tenants    int
	Prefill    int // prefill instances, including a canary if the scenario has one
	Decode     int
	OutDir     string
	PageEvents bool // write page-events/<node>.jsonl (engine debug tracing)
	// MooncakeSeparate writes each node's Mooncake transfer-engine glog
	// lines to <node>.mooncake.log. By default they go into the engine's
	// own log, interleaved, as a process logging with 2>&1 writes them.
	MooncakeSeparate bool
	// DecodePool overrides the decode KV pool per DP rank in tokens
	// (max_total_num_tokens): small pools run nearly full and merge their
	// released pages often, large ones rarely.
	DecodePool int
	// PageSize overrides every engine's page_size (0: 64, the scenario's
	// FlashMLA pages). 1 is SGLang's default for most attention backends;
	// its decode servers then allocate with TokenToKVPoolAllocator.
	PageSize int
	// Retractions overrides the share of decoded requests retracted once
	// (0: the scenario's own, 0.2 % for incident-2026); at most 0.5.
	Retractions float64
}

// Limits on overrides: they keep one run's memory and file count bounded.
const (
	maxDays    = 60
	maxTenants = 500
	maxNodes   = 64
	maxScale   = 1000
)

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if !slices.Contains(Scenarios(), c.Scenario) {
		return fmt.Errorf("unknown scenario %q (want one of %v)", c.Scenario, Scenarios())
	}
	if c.Scale <= 0 || c.Scale > maxScale {
		return fmt.Errorf("scale %v out of range (0, %d]", c.Scale, maxScale)
	}
	if c.Days < 0 || c.Days > maxDays {
		return fmt.Errorf("days %d out of range [0, %d]", c.Days, maxDays)
	}
	if c.Tenants < 0 || c.Tenants > maxTenants {
		return fmt.Errorf("tenants %d out of range [0, %d]", c.Tenants, maxTenants)
	}
	if c.Prefill < 0 || c.Prefill > maxNodes || c.Decode < 0 || c.Decode > maxNodes {
		return fmt.Errorf("prefill %d / decode %d out of range [0, %d]", c.Prefill, c.Decode, maxNodes)
	}
	if c.Retractions < 0 || c.Retractions > 0.5 {
		return fmt.Errorf("retractions %g: want a share from 0 to 0.5", c.Retractions)
	}
	if !PageSizeOK(c.PageSize) {
		return fmt.Errorf("page size %d tokens: want 0 (default) to %d", c.PageSize, MaxPageSize)
	}
	if ps := cmp.Or(c.PageSize, defaultPageSize); c.DecodePool < 0 || (c.DecodePool > 0 && c.DecodePool < 16*ps) {
		return fmt.Errorf("decode pool %d tokens: want 0 (default) or at least %d", c.DecodePool, 16*ps)
	}
	if c.OutDir == "" {
		return errors.New("out dir is required")
	}
	return nil
}

// MaxPageSize is the largest page_size the simulated engines run with.
const MaxPageSize = 1024

// PageSizeOK says whether the simulator runs engines at page size ps
// tokens (0: the default).
func PageSizeOK(ps int) bool { return ps >= 0 && ps <= MaxPageSize }

// Summary is what one run produced.
type Summary struct {
	Scenario        string
	Requests        int
	Affected        int
	AffectedTenants int // tenants that received another tenant's data
	ExposedTenants  int // tenants whose data another tenant may have received
	Lookalikes      int
	Files           int
	Lines           int64
	Bytes           int64
}
