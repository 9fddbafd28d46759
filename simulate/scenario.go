package simulate

import "time"

// Scenarios lists the scenario names Run accepts.
func Scenarios() []string { return []string{"incident-2026", "abort-race", "clean", "mixed"} }

type faultSet struct {
	placeholder   bool // rejected-placeholder (#30233)
	abortReuse    bool // decode frees pages on abort while the prefill write is in flight
	metaCollision bool // metadata buffer index collision
}

// scenario holds the knobs of one named scenario at scale 1.
type scenario struct {
	name     string
	start    time.Time
	days     int
	tenants  int
	prefill  int
	decode   int
	canary   bool // last prefill node is a canary with a pool twice the context
	unified  bool // one non-PD worker behind the same gateway
	gateways int
	requests float64 // nominal requests at scale 1 over all days (excluding deep sessions)
	deep     int     // scripted long-context agent sessions at scale 1
	faults   faultSet

	buggyPool  int // prefill pool on the non-canary nodes (tokens)
	decodePool int // decode pool per DP rank (tokens)
	pageSize   int // every engine's page_size (tokens)

	stallProb     float64 // transfer stalls (RDMA retries) long enough to provoke client aborts
	timeoutProb   float64 // transfer never completes: 300 s waiting timeout, 500
	cancelProb    float64 // user cancels during decode (499)
	retractProb   float64
	collisionProb float64
}

const (
	contextLen      = 1_048_576
	defaultPageSize = 64
	decodePool      = 3_145_728
	immunePool      = 1_245_184
	canaryPool      = 2 * contextLen
	incidentPool    = 681_280
	unifiedPool     = 401_408
	prefillDP       = 2
	decodeDP        = 4
	waitingTimeout  = 300 * time.Second
	metricsInterval = 5 * time.Minute
	decodeLogEvery  = 10 * time.Second
)

func lookupScenario(name string) scenario {
	base := scenario{
		pageSize: defaultPageSize,
		name:     name, start: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), gateways: 2,
		buggyPool: immunePool, decodePool: decodePool, stallProb: 0.002, timeoutProb: 0.0005, cancelProb: 0.004, retractProb: 0.002,
	}
	switch name {
	case "incident-2026":
		base.days, base.tenants, base.prefill, base.decode = 13, 24, 6, 4
		base.canary, base.unified = true, true
		base.requests, base.deep = 100_000, 14
		base.faults = faultSet{placeholder: true}
		base.buggyPool = incidentPool
	case "abort-race":
		base.start = time.Date(2026, 7, 20, 0, 0, 0, 0, time.UTC)
		base.days, base.tenants, base.prefill, base.decode = 2, 10, 2, 2
		base.requests = 60_000
		base.faults = faultSet{abortReuse: true}
		base.stallProb = 0.01
	case "clean":
		base.start = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		base.days, base.tenants, base.prefill, base.decode = 3, 12, 3, 2
		base.unified = true
		base.requests, base.deep = 50_000, 2
	case "mixed":
		base.start = time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)
		base.days, base.tenants, base.prefill, base.decode = 4, 16, 4, 3
		base.canary, base.unified = true, true
		base.requests, base.deep = 80_000, 4
		base.faults = faultSet{placeholder: true, abortReuse: true, metaCollision: true}
		base.buggyPool = incidentPool
		base.stallProb, base.collisionProb = 0.006, 0.0015
	}
	return base
}

func (s *scenario) apply(cfg Config) {
	if cfg.Days > 0 {
		s.days = cfg.Days
	}
	if cfg.Tenants > 0 {
		s.tenants = cfg.Tenants
	}
	if cfg.Prefill > 0 {
		s.prefill = cfg.Prefill
	}
	if cfg.Decode > 0 {
		s.decode = cfg.Decode
	}
	if cfg.DecodePool > 0 {
		s.decodePool = cfg.DecodePool
	}
	if cfg.PageSize > 0 {
		s.pageSize = cfg.PageSize
	}
	if cfg.Retractions > 0 {
		s.retractProb = cfg.Retractions
	}
	if s.prefill < 2 {
		s.canary = false
	}
}
