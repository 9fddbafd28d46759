// Package posture reads, for every node and engine boot, the settings that
// decide exposure to the cross-request KV bugs of SGLang prefill/decode
// serving — role and PD mode, version, page size, KV pool against context
// length and the resulting max_req_input_len, deferred KV release, the
// decode metadata read check — and which known bugs (knownbugs.json) that
// boot is exposed to.
//
// Every value comes from lines kvtrail stored: node_boots (server_args and
// the scheduler limits line), raw lines near the boot (version lines,
// environment dumps) and transfer events. A value that was not logged is
// "unknown", never a default or a guess.
package posture

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DB is what posture reads through (internal/chstore.Store has it, and
// holds the statements).
type DB interface {
	// PostureBoots are every engine boot (node_boots, deduplicated), by node
	// then boot time.
	PostureBoots(ctx context.Context) ([]BootRow, error)
	// LinePlaces are where node's lines ids are: LineID, File and Offset
	// set.
	LinePlaces(ctx context.Context, node string, ids []uint64) ([]BootLine, error)
	// VersionLines are node's lines from..to (or without a time) that may
	// carry an SGLang version or an environment dump (prefiltered; matched
	// exactly here), in file order, at most 20,000.
	VersionLines(ctx context.Context, node string, from, to time.Time) ([]BootLine, error)
	// ReadCheckFirings are, per node, the first firing and the count of
	// the decode metadata read check (reference §c4).
	ReadCheckFirings(ctx context.Context) ([]Firing, error)
	// ReleaseTimeouts are the deferred KV releases that timed out
	// (reference §c4), per node and hour: the first and the count.
	ReleaseTimeouts(ctx context.Context) ([]Firing, error)
}

// BootRow is one engine boot as node_boots holds it.
type BootRow struct {
	Node, Role         string
	BootNS             uint64
	BootID             string
	Mode, Backend      string
	PageSize           uint32
	ContextLen, Pool   uint64
	MaxReqInputLen     uint64
	ArgKeys, ArgValues []string
	LineIDs            []uint64
}

// BootLine is a stored line near a boot: its id, file (digest), byte
// offset and text.
type BootLine struct {
	LineID uint64
	File   string
	Offset uint64
	Line   string
}

// Firing is the first of a logged event on a node (the read check per
// node, the deferred release timeouts per node and hour) and how many.
type Firing struct {
	Node      string
	FirstNS   uint64
	FirstLine uint64
	N         uint64
}

// UnknownValue is what a value that was not logged reads as.
const UnknownValue = "unknown"

// Fact is one value with where it came from.
type Fact struct {
	Value  string `json:"value"`
	Source string `json:"source,omitempty"`
}

// Known reports whether the value was logged (or derived from logged values).
func (f Fact) Known() bool { return f.Value != "" && f.Value != UnknownValue }

func unknown(why string) Fact { return Fact{Value: UnknownValue, Source: why} }

// BootPosture is one engine boot's posture.
type BootPosture struct {
	Node   string     `json:"node"`
	Role   string     `json:"role"`
	BootID string     `json:"boot_id"`
	BootTS time.Time  `json:"boot_ts"`
	EndTS  *time.Time `json:"end_ts,omitempty"` // the node's next boot
	Latest bool       `json:"latest"`           // the node's last known boot

	PDMode           Fact `json:"pd_mode"` // prefill | decode | none
	TransferBackend  Fact `json:"transfer_backend"`
	Version          Fact `json:"sglang_version"`
	PageSize         Fact `json:"page_size"`
	PoolTokens       Fact `json:"pool_tokens"` // max_total_num_tokens
	ContextLen       Fact `json:"context_len"`
	MaxReqInputLen   Fact `json:"max_req_input_len"`
	PoolBelowContext Fact `json:"pool_below_context"` // yes | no
	DeferredRelease  Fact `json:"deferred_release"`   // on | off
	ReadCheck        Fact `json:"read_check"`         // present
	PageTag          Fact `json:"page_tag"`

	// RejectThreshold is the prompt length (tokens) from which this node
	// must refuse a request: max_req_input_len when the pool is the
	// tighter limit, else the context length. 0 when not logged.
	RejectThreshold uint64 `json:"reject_threshold"`
	// ReleaseTimeouts counts the deferred KV releases that timed out on
	// this boot: each gave an aborted request's pages back without the
	// prefill's drain ack.
	ReleaseTimeouts uint64 `json:"deferred_release_timeouts"`

	Bugs []Exposure `json:"known_bugs"`
	// Evidence are the raw line ids the values were read from.
	Evidence []uint64 `json:"evidence_line_ids"`
}

// Exposed returns the ids of the bugs this boot is exposed to.
func (p *BootPosture) Exposed() []string {
	var out []string
	for _, e := range p.Bugs {
		if e.Status == Exposed {
			out = append(out, e.BugID)
		}
	}
	return out
}

// Fleet is the posture of every boot, by node then boot time.
type Fleet struct {
	Boots []*BootPosture `json:"boots"`
	Bugs  []Bug          `json:"known_bugs"`
}

// Latest returns each node's last boot.
func (f *Fleet) Latest() []*BootPosture {
	var out []*BootPosture
	for _, b := range f.Boots {
		if b.Latest {
			out = append(out, b)
		}
	}
	return out
}

// Node returns the boots of one node, oldest first.
func (f *Fleet) Node(node string) []*BootPosture {
	var out []*BootPosture
	for _, b := range f.Boots {
		if b.Node == node {
			out = append(out, b)
		}
	}
	return out
}

// How far before a boot's first startup fact a version line or an
// environment dump is still taken to describe that boot (bounded by the
// previous boot), and how far after.
const (
	lookBefore = 10 * time.Minute
	lookAfter  = 10 * time.Minute
)

// Load reads the fleet's posture.
func Load(ctx context.Context, db DB) (*Fleet, error) {
	bugs, err := KnownBugs()
	if err != nil {
		return nil, err
	}
	boots, err := loadBoots(ctx, db)
	if err != nil {
		return nil, err
	}
	checks, err := loadReadChecks(ctx, db)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(boots); {
		j := i
		for j < len(boots) && boots[j].Node == boots[i].Node {
			j++
		}
		if err := readBootLines(ctx, db, boots[i:j]); err != nil {
			return nil, err
		}
		i = j
	}
	timeouts, err := db.ReleaseTimeouts(ctx)
	if err != nil {
		return nil, fmt.Errorf("posture: deferred release timeouts: %w", err)
	}
	for _, p := range boots {
		if c, ok := checks[p.Node]; ok && !c.at.Before(p.BootTS) && (p.EndTS == nil || c.at.Before(*p.EndTS)) {
			p.ReadCheck = Fact{Value: "present", Source: fmt.Sprintf("the metadata read check fired on this boot (%d times, first line %d)", c.n, c.line)}
			p.Evidence = append(p.Evidence, c.line)
		}
		applyReleaseTimeouts(p, timeouts)
		for _, b := range bugs {
			p.Bugs = append(p.Bugs, evaluate(b, p))
		}
	}
	return &Fleet{Boots: boots, Bugs: bugs}, nil
}

func loadBoots(ctx context.Context, db DB) ([]*BootPosture, error) {
	rows, err := db.PostureBoots(ctx)
	if err != nil {
		return nil, fmt.Errorf("posture: load node boots: %w", err)
	}
	out := make([]*BootPosture, 0, len(rows))
	for _, r := range rows {
		p := BootPosture{Node: r.Node, Role: r.Role, BootID: r.BootID}
		p.BootTS = time.Unix(0, int64(r.BootNS)).UTC()
		p.Evidence = r.LineIDs
		args := map[string]string{}
		for i, k := range r.ArgKeys {
			if i < len(r.ArgValues) {
				args[k] = r.ArgValues[i]
			}
		}
		fill(&p, args, r.Mode, r.Backend, r.PageSize, r.ContextLen, r.Pool, r.MaxReqInputLen)
		out = append(out, &p)
	}
	for i, p := range out {
		if i+1 < len(out) && out[i+1].Node == p.Node {
			end := out[i+1].BootTS
			p.EndTS = &end
		} else {
			p.Latest = true
		}
	}
	return out, nil
}

// fill sets the values node_boots holds. server_args is the only source of
// the mode and the page size (§a1); the limits line of max_total_num_tokens
// and context_len (§a4).
func fill(p *BootPosture, args map[string]string, mode, backend string, page uint32, ctxLen, pool, maxReq uint64) {
	hasArgs := len(args) > 0
	_, hasMode := args["disaggregation_mode"]
	switch {
	case !hasArgs || !hasMode:
		p.PDMode = unknown("no server_args line with disaggregation_mode")
	case mode == "prefill" || mode == "decode":
		p.PDMode = Fact{Value: mode, Source: "server_args disaggregation_mode"}
	case mode == "null" || mode == "":
		p.PDMode = Fact{Value: "none", Source: "server_args disaggregation_mode='null'"}
	default:
		p.PDMode = Fact{Value: mode, Source: "server_args disaggregation_mode"}
	}
	if _, ok := args["disaggregation_transfer_backend"]; ok && backend != "" && p.PDMode.Value != "none" {
		p.TransferBackend = Fact{Value: backend, Source: "server_args disaggregation_transfer_backend"}
	} else if p.PDMode.Value == "none" {
		p.TransferBackend = Fact{Value: "none", Source: "not a PD node"}
	} else {
		p.TransferBackend = unknown("not in server_args")
	}
	if page > 0 {
		p.PageSize = Fact{Value: strconv.FormatUint(uint64(page), 10), Source: "server_args page_size"}
	} else if v, ok := args["page_size"]; ok {
		p.PageSize = unknown("server_args page_size=" + v + " (resolved at startup, not logged)")
	} else {
		p.PageSize = unknown("no server_args page_size")
	}
	if pool > 0 {
		p.PoolTokens = Fact{Value: strconv.FormatUint(pool, 10), Source: "scheduler limits line max_total_num_tokens"}
	} else {
		p.PoolTokens = unknown("no scheduler limits line")
	}
	if ctxLen > 0 {
		p.ContextLen = Fact{Value: strconv.FormatUint(ctxLen, 10), Source: "scheduler limits line context_len"}
	} else {
		p.ContextLen = unknown("no scheduler limits line")
	}
	if maxReq > 0 && pool > 0 && ctxLen > 0 {
		p.MaxReqInputLen = Fact{Value: strconv.FormatUint(maxReq, 10), Source: "derived: min(context_len-1, max_total_num_tokens-1)-5"}
		// The scheduler rejects len >= max_req_input_len (§c1); the
		// tokenizer only checks the context length (§c2).
		p.RejectThreshold = min(maxReq, ctxLen)
		if maxReq+6 < ctxLen {
			p.PoolBelowContext = Fact{Value: "yes", Source: fmt.Sprintf("prompts of %d..%d tokens pass the tokenizer and are rejected by the scheduler", maxReq, ctxLen)}
		} else {
			p.PoolBelowContext = Fact{Value: "no", Source: "KV pool is at least the context length"}
		}
	} else {
		p.MaxReqInputLen = unknown("needs max_total_num_tokens and context_len")
		p.PoolBelowContext = unknown("needs max_total_num_tokens and context_len")
	}
	p.Version = unknown("no version line or environment dump near the boot")
	p.DeferredRelease = unknown("no environment dump near the boot")
	if p.PDMode.Value == "none" {
		p.DeferredRelease = Fact{Value: "n/a", Source: "not a PD node"}
	}
	// Some builds may expose the switch as a server argument.
	for k, v := range args {
		if strings.Contains(k, "deferred") && strings.Contains(k, "release") {
			p.DeferredRelease = Fact{Value: onOff(truthy(v)), Source: "server_args " + k}
		}
	}
	p.ReadCheck = unknown("not logged at startup by any version read; present once it fires")
	p.PageTag = unknown("no version read logs page tags at startup")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// readBootLines reads the version lines and environment dumps of one
// node's boots. A dump is printed before the engine starts, so each line
// belongs to the next boot that starts after it in the same file; a line
// with no boot after it belongs to the last boot before it.
func readBootLines(ctx context.Context, db DB, boots []*BootPosture) error {
	node := boots[0].Node
	var ids []uint64
	for _, p := range boots {
		ids = append(ids, p.Evidence...)
	}
	// starts[k][file] = the boot's first line offset in that file.
	starts := make([]map[string]uint64, len(boots))
	if len(ids) > 0 {
		owner := map[uint64]int{}
		for k, p := range boots {
			for _, id := range p.Evidence {
				owner[id] = k
			}
		}
		places, err := db.LinePlaces(ctx, node, ids)
		if err != nil {
			return fmt.Errorf("posture: boot lines of %s: %w", node, err)
		}
		for _, l := range places {
			k := owner[l.LineID]
			if starts[k] == nil {
				starts[k] = map[string]uint64{}
			}
			if o, ok := starts[k][l.File]; !ok || l.Offset < o {
				starts[k][l.File] = l.Offset
			}
		}
	}
	from := boots[0].BootTS.Add(-lookBefore)
	to := boots[len(boots)-1].BootTS.Add(lookAfter)
	lines, err := db.VersionLines(ctx, node, from, to)
	if err != nil {
		return fmt.Errorf("posture: version and environment lines of %s: %w", node, err)
	}
	perBoot := make([][]bootLine, len(boots))
	for _, l := range lines {
		file, off := l.File, l.Offset
		next, prev := -1, -1
		var nextOff, prevOff uint64
		for k := range boots {
			o, ok := starts[k][file]
			switch {
			case !ok:
			case o > off && (next < 0 || o < nextOff):
				next, nextOff = k, o
			case o <= off && (prev < 0 || o > prevOff):
				prev, prevOff = k, o
			}
		}
		k := next
		if k < 0 {
			k = prev
		}
		if k >= 0 {
			perBoot[k] = append(perBoot[k], bootLine{l.LineID, l.Line})
		}
	}
	for k, p := range boots {
		applyBootLines(p, perBoot[k])
	}
	return nil
}

type bootLine struct {
	id   uint64
	line string
}

func applyBootLines(p *BootPosture, hits []bootLine) {
	var envSeen, deferredSet bool
	var envLine uint64
	for _, h := range hits {
		id, line := h.id, h.line
		if v, ok := versionFromLine(line); ok {
			// The line closest to the boot wins: rows are in file order.
			p.Version = Fact{Value: v, Source: fmt.Sprintf("version line %d", id)}
			p.Evidence = appendOnce(p.Evidence, id)
		}
		if isEnv, val, has := envDumpLine(line); isEnv {
			if !envSeen {
				envSeen, envLine = true, id
			}
			if has && p.DeferredRelease.Value != "n/a" {
				p.DeferredRelease = Fact{Value: onOff(truthy(val)), Source: fmt.Sprintf("environment line %d: %s=%s", id, DeferredReleaseEnv, val)}
				p.Evidence = appendOnce(p.Evidence, id)
				deferredSet = true
			}
		}
	}
	if envSeen && !deferredSet && p.DeferredRelease.Value == UnknownValue {
		// An environment dump that lists SGLANG_ variables but not this
		// one: the switch is unset, and unset means off (PR #35049).
		p.DeferredRelease = Fact{Value: "off", Source: fmt.Sprintf("environment dump (line %d) without %s; unset is off", envLine, DeferredReleaseEnv)}
		p.Evidence = appendOnce(p.Evidence, envLine)
	}
}

// applyReleaseTimeouts marks the boots on which a deferred KV release
// timed out: the line exists only with the switch on, whatever an
// environment dump said, and each one released pages unconfirmed.
func applyReleaseTimeouts(p *BootPosture, timeouts []Firing) {
	var first Firing
	for _, f := range timeouts {
		at := time.Unix(0, int64(f.FirstNS)).UTC()
		if f.Node != p.Node || at.Before(p.BootTS) || (p.EndTS != nil && !at.Before(*p.EndTS)) {
			continue
		}
		if p.ReleaseTimeouts == 0 || f.FirstNS < first.FirstNS {
			first = f
		}
		p.ReleaseTimeouts += f.N
	}
	if p.ReleaseTimeouts == 0 {
		return
	}
	p.DeferredRelease = Fact{Value: "on", Source: fmt.Sprintf("deferred KV releases timed out on this boot (%d times, first line %d), which only happens with %s on",
		p.ReleaseTimeouts, first.FirstLine, DeferredReleaseEnv)}
	p.Evidence = appendOnce(p.Evidence, first.FirstLine)
}

type readCheck struct {
	at   time.Time
	line uint64
	n    uint64
}

func loadReadChecks(ctx context.Context, db DB) (map[string]readCheck, error) {
	rows, err := db.ReadCheckFirings(ctx)
	if err != nil {
		return nil, fmt.Errorf("posture: read checks: %w", err)
	}
	out := map[string]readCheck{}
	for _, r := range rows {
		out[r.Node] = readCheck{at: time.Unix(0, int64(r.FirstNS)).UTC(), line: r.FirstLine, n: r.N}
	}
	return out, nil
}

func appendOnce(s []uint64, v uint64) []uint64 {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// Regression is a boot that is worse than the node's previous boot.
type Regression struct {
	Node     string       `json:"node"`
	Prev     *BootPosture `json:"previous"`
	Boot     *BootPosture `json:"boot"`
	Changes  []string     `json:"changes"`
	NewBugs  []string     `json:"newly_exposed"`
	Evidence []uint64     `json:"evidence_line_ids"`
}

// Regressions compares each boot with the node's previous one: a version
// going down, the pool falling below the context length or the limit
// shrinking, deferred release turned off, or a known bug newly exposed.
func (f *Fleet) Regressions() []Regression {
	var out []Regression
	for i := 1; i < len(f.Boots); i++ {
		prev, cur := f.Boots[i-1], f.Boots[i]
		if prev.Node != cur.Node {
			continue
		}
		var r Regression
		if a, b := vOf(prev), vOf(cur); a != nil && b != nil && b.Compare(*a) < 0 {
			r.Changes = append(r.Changes, fmt.Sprintf("SGLang version went down: %s -> %s", prev.Version.Value, cur.Version.Value))
		}
		if prev.PoolBelowContext.Value == "no" && cur.PoolBelowContext.Value == "yes" {
			r.Changes = append(r.Changes, fmt.Sprintf("KV pool fell below the context length: max_req_input_len %s < context_len %s",
				cur.MaxReqInputLen.Value, cur.ContextLen.Value))
		} else if a, b := num(prev.MaxReqInputLen), num(cur.MaxReqInputLen); a > 0 && b > 0 && b < a && cur.PoolBelowContext.Value == "yes" {
			r.Changes = append(r.Changes, fmt.Sprintf("max_req_input_len shrank: %d -> %d (context_len %s)", a, b, cur.ContextLen.Value))
		}
		if prev.DeferredRelease.Value == "on" && cur.DeferredRelease.Value == "off" {
			r.Changes = append(r.Changes, "deferred KV release turned off")
		}
		was := map[string]string{}
		for _, e := range prev.Bugs {
			was[e.BugID] = e.Status
		}
		for _, e := range cur.Bugs {
			if e.Status == Exposed && was[e.BugID] != Exposed {
				r.NewBugs = append(r.NewBugs, e.BugID)
			}
		}
		if len(r.Changes) == 0 && len(r.NewBugs) == 0 {
			continue
		}
		r.Node, r.Prev, r.Boot = cur.Node, prev, cur
		r.Evidence = append(append([]uint64{}, cur.Evidence...), prev.Evidence...)
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Boot.BootTS.Before(out[j].Boot.BootTS) })
	return out
}

func vOf(p *BootPosture) *Version {
	if !p.Version.Known() {
		return nil
	}
	v, ok := ParseVersion(p.Version.Value)
	if !ok {
		return nil
	}
	return &v
}

func num(f Fact) uint64 {
	if !f.Known() {
		return 0
	}
	n, _ := strconv.ParseUint(f.Value, 10, 64)
	return n
}
