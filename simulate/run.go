package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// Run simulates cfg's scenario and writes every output file into cfg.OutDir.
func Run(ctx context.Context, cfg Config) (_ *Summary, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("simulate %s (seed %d): %w", cfg.Scenario, cfg.Seed, err)
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("create out dir: %w", err)
	}
	s, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	defer s.closeAll()
	if err := s.loop(ctx); err != nil {
		return nil, err
	}
	return s.finish()
}

func newSim(cfg Config) (*sim, error) {
	sc := lookupScenario(cfg.Scenario)
	sc.apply(cfg)
	s := &sim{cfg: cfg, sc: sc, truth: newTruthBuilder(),
		rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6b767472_61696c)), ids: idGen{seed: uint64(cfg.Seed)}}
	s.base = sc.start.UnixNano()
	s.span = int64(sc.days) * int64(24*time.Hour)
	s.nodes = buildCluster(&s.sc, s.rng.Float64)
	for _, n := range s.nodes {
		skew := int64((s.rng.Float64()*3 - 1.5) * float64(time.Second))
		skew = skew / int64(time.Millisecond) * int64(time.Millisecond)
		var err error
		if n.log, err = newLineWriter(cfg.OutDir, n.name+".log", s.base, skew); err != nil {
			return nil, err
		}
		switch {
		case n.role == roleUnified:
		case cfg.MooncakeSeparate:
			if n.mc, err = newLineWriter(cfg.OutDir, n.name+".mooncake.log", s.base, skew); err != nil {
				return nil, err
			}
		default:
			n.mc = n.log // one process stream: glog lines interleaved with SGLang's
		}
		if cfg.PageEvents && n.role == roleDecode {
			if n.pe, err = newLineWriter(cfg.OutDir, filepath.Join("page-events", n.name+".jsonl"), s.base, skew); err != nil {
				return nil, err
			}
		}
		switch n.role {
		case rolePrefill:
			s.prefill = append(s.prefill, n)
		case roleDecode:
			s.decode = append(s.decode, n)
		case roleUnified:
			s.unified = n
		}
		for i, b := range n.boots {
			if i > 0 {
				s.heap.push(event{at: b.down, kind: evDown, n: n, aux: b2i(b.crash)})
			}
			s.heap.push(event{at: b.at, kind: evBoot, n: n, aux: int32(i)})
		}
	}
	for i := 0; i < s.sc.gateways; i++ {
		lw, err := newLineWriter(cfg.OutDir, fmt.Sprintf("gateway-%d.jsonl", i), s.base, 0)
		if err != nil {
			return nil, err
		}
		s.gws = append(s.gws, lw)
	}
	s.buildTenants()
	warm := int64(2 * time.Minute) // traffic starts once the first nodes are up
	for i := range s.tenants {
		s.heap.push(event{at: warm + int64(i)*int64(time.Second), kind: evSource, aux: int32(i)})
		s.heap.push(event{at: warm + int64(i)*int64(time.Second) + 500, kind: evSource, aux: int32(i), rank: 1})
	}
	s.scheduleDeep()
	s.heap.push(event{at: 0, kind: evScrape})
	return s, nil
}

func (s *sim) loop(ctx context.Context) error {
	for n := 0; s.heap.len() > 0; n++ {
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		e := s.heap.pop()
		t := e.at
		switch e.kind {
		case evSource:
			s.sourceFire(t, int(e.aux), e.rank == 1)
		case evArrive:
			if t < s.span {
				s.arrive(t, e.r)
			}
		case evPRecv:
			s.prefillRecv(t, e.r)
		case evDRecv:
			s.decodeRecv(t, e.r)
		case evDAllocRetry:
			s.tryAlloc(t, e.r)
		case evPStart:
			s.prefillStart(t, e.r)
		case evPDone:
			s.prefillDone(t, e.r)
		case evLand:
			s.land(t, e.r)
		case evFirst:
			s.firstToken(t, e.r)
		case evFinish:
			s.finishDecode(t, e.r, false)
		case evCancel:
			s.finishDecode(t, e.r, true)
		case evRetract:
			s.retractDecode(t, e.r)
		case evResume:
			s.resumeDecode(t, e.r)
		case evAbort:
			s.clientAbort(t, e.r)
		case evTimeout:
			s.transferTimeout(t, e.r)
		case evUFinish:
			s.unifiedFinish(t, e.r)
		case evDown:
			s.nodeDown(t, e.n, e.aux == 1)
		case evBoot:
			s.nodeBoot(t, e.n, int(e.aux))
		case evReady:
			e.n.up = true
		case evTick:
			s.tick(t, e.n, int(e.rank), uint32(e.aux))
		case evScrape:
			s.scrape(t)
			if next := t + int64(metricsInterval); next <= s.span {
				s.heap.push(event{at: next, kind: evScrape})
			}
		}
		if s.err != nil {
			return s.err
		}
	}
	return nil
}

func (s *sim) writers() []*lineWriter {
	var out []*lineWriter
	for _, n := range s.nodes {
		mc := n.mc
		if mc == n.log {
			mc = nil // the engine stream, listed once
		}
		for _, lw := range []*lineWriter{n.log, mc, n.pe} {
			if lw != nil {
				out = append(out, lw)
			}
		}
	}
	return append(out, s.gws...)
}

// closeAll releases files on error paths; finish closes them normally.
func (s *sim) closeAll() {
	for _, lw := range s.writers() {
		if lw.f != nil {
			lw.f.Close()
		}
	}
}

func (s *sim) finish() (*Summary, error) {
	for _, n := range s.nodes {
		if err := s.flushMetrics(n); err != nil {
			return nil, err
		}
	}
	for _, lw := range s.writers() {
		if err := lw.close(); err != nil {
			return nil, err
		}
		lw.f = nil
		s.files++
		s.lines += lw.lines
		s.bytes += lw.bytes
	}
	tr := s.truth.finish()
	tr.Scenario, tr.Seed, tr.Scale, tr.Requests = s.sc.name, s.cfg.Seed, s.cfg.Scale, s.requests
	tr.Start, tr.End = s.sc.start, s.sc.start.Add(time.Duration(s.span))
	tr.Faults = []string{}
	if s.sc.faults.placeholder {
		tr.Faults = append(tr.Faults, ClassRejectedPlaceholder)
	}
	if s.sc.faults.abortReuse {
		tr.Faults = append(tr.Faults, ClassAbortReuse)
	}
	if s.sc.faults.metaCollision {
		tr.Faults = append(tr.Faults, ClassMetadataCollision)
	}
	for _, n := range s.nodes {
		for _, b := range n.boots {
			tr.Nodes = append(tr.Nodes, NodeTruth{Node: n.name, Role: n.role.String(), Boot: time.Unix(0, s.base+b.at).UTC(),
				Version: n.version.String(), MaxTotalTokens: b.pool, ContextLen: contextLen, MaxReqInputLen: maxReqInputLen(b.pool, contextLen),
				PageSize: s.sc.pageSize, DPSize: n.dp, Canary: n.canary, Endpoint: n.url, ClockSkew: time.Duration(n.log.skew).String()})
		}
	}
	if tr.Affected == nil {
		tr.Affected = []AffectedRequest{}
	}
	if tr.Lookalikes == nil {
		tr.Lookalikes = []Lookalike{}
	}
	data, err := json.MarshalIndent(tr, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encode truth: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.cfg.OutDir, "truth.json"), append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write truth: %w", err)
	}
	if err := writeYAML(s.cfg.OutDir, "sources.yaml", s.manifest()); err != nil {
		return nil, err
	}
	return &Summary{Scenario: s.sc.name, Requests: s.requests, Affected: len(tr.Affected),
		AffectedTenants: len(tr.ReceivedForeignData), ExposedTenants: len(tr.PossiblyExposed),
		Lookalikes: len(tr.Lookalikes), Files: s.files + 2, Lines: s.lines, Bytes: s.bytes}, nil
}
