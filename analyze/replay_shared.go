package analyze

import (
	"cmp"
	"context"
)

// The allocator replay is the costliest step of an analysis after the
// load, and two consumers need it: abort_reuse (the holders of its
// candidates' pages) and the reconstruction (the writers of its victims'
// pages). A replay's answer for a room does not depend on which other
// rooms are asked about (the allocator's state evolves the same way; asking
// more only replays a lane further), so one replay per Dataset answers
// both: the Runner notes each analyzer's victim findings as they are made,
// and the first replay (abort_reuse's, which runs after the analyzers that
// mark placeholder victims) is asked about its candidates and the victims
// known so far. The reconstruction then finds its victims answered and
// replays again only for rooms nobody asked about yet (victims of
// analyzers that run later, or of earlier runs), or when its placeholder
// set differs (a run of a subset of analyzers).

// sharedReplay is what a Dataset's replay was asked and answered.
type sharedReplay struct {
	asked       map[uint64]bool
	placeholder map[uint64]bool
	res         *lineageSet
	// passes counts the replays run (tests check the sharing).
	passes int
}

// noteVictims records the victim requests of this run's victim findings
// so far, so the first replay can answer for them too. The Dataset reads
// the caller's rooms, not a copy: the Runner keeps them for the
// reconstruction anyway.
func (d *Dataset) noteVictims(v *victimRooms) {
	d.noted = v
}

// victimRooms is, per victim request of some victim findings (a finding
// at its analyzer's victim severity), the room of its first finding in
// the order the reconstruction reads them (domain.SortFindings, whatever
// order they were added in) and whether rejected_served or
// over_threshold flagged it (its decode wrote only the first page). It
// is what the allocator replay is asked about for the victims, kept in
// place of the findings themselves: at incident-2026 scale 100 about
// 18,777 victim requests, where their 74,235 findings were 45 MiB.
type victimRooms struct {
	at          map[string]int32 // index by request key
	keys        []string
	rooms       []uint64
	placeholder []bool
	first       []findingOrder // the first finding of each, whose room rooms holds
	findings    []int32        // how many findings each has
}

// findingOrder is where a finding sorts in domain.SortFindings' order.
type findingOrder struct {
	analyzer string
	ts       int64
	id       string
}

func orderOf(f *Finding) findingOrder { return findingOrder{f.Analyzer, f.TS.UnixNano(), f.ID} }

func (o findingOrder) compare(p findingOrder) int {
	return cmp.Or(cmp.Compare(o.analyzer, p.analyzer), cmp.Compare(o.ts, p.ts), cmp.Compare(o.id, p.id))
}

func (o findingOrder) before(p findingOrder) bool { return o.compare(p) < 0 }

// add counts f when it marks a victim, and returns the victim's index
// (-1: it marks none).
func (v *victimRooms) add(f *Finding) int32 {
	if !marksVictim(f.Analyzer, f) {
		return -1
	}
	if v.at == nil {
		v.at = map[string]int32{}
	}
	o := orderOf(f)
	i, ok := v.at[f.RequestKey]
	switch {
	case !ok:
		i = int32(len(v.keys))
		v.at[f.RequestKey] = i
		v.keys = append(v.keys, f.RequestKey)
		v.rooms = append(v.rooms, f.Room)
		v.placeholder = append(v.placeholder, false)
		v.first = append(v.first, o)
		v.findings = append(v.findings, 0)
	case o.before(v.first[i]):
		v.rooms[i], v.first[i] = f.Room, o
	}
	v.findings[i]++
	if f.Analyzer == "rejected_served" || f.Analyzer == "over_threshold" {
		v.placeholder[i] = true
	}
	return i
}

// wants is the rooms to replay: each victim's room, unless page events
// on its decode node give the exact lineage; placeholder marks the rooms
// of the victims rejected_served or over_threshold flagged.
func (v *victimRooms) wants(d *Dataset, pr *pageReplay) (want, placeholder map[uint64]bool) {
	want, placeholder = map[uint64]bool{}, map[uint64]bool{}
	if v == nil {
		return want, placeholder
	}
	for i, k := range v.keys {
		r := v.rooms[i]
		if r == 0 {
			continue
		}
		if fa := d.request(k); fa != nil && fa.HasDecode && pr != nil && pr.Nodes[fa.DecodeNode] {
			continue // exact lineage, no replay needed
		}
		want[r] = true
		if v.placeholder[i] {
			placeholder[r] = true
		}
	}
	return want, placeholder
}

// lineage answers the replay for the wanted victim rooms from the
// Dataset's one shared replay, replaying (again) only when a wanted room
// was not asked before or the placeholder set changed.
func (d *Dataset) lineage(ctx context.Context, placeholder, want map[uint64]bool) (lineageView, error) {
	if _, err := d.sharedReplay(ctx, placeholder, &replayAsk{writers: want}); err != nil {
		return lineageView{}, err
	}
	v := lineageView{want: want}
	if d.replay != nil {
		v.set = d.replay.res
	}
	return v, nil
}

// heldBy answers, for abort candidates, which of the rooms in of held
// their pages before them (replayAnswer.held). It always replays, and
// answers the victims noted so far on the way (their lineage is kept for
// the reconstruction); the candidates' answers are not kept.
func (d *Dataset) heldBy(ctx context.Context, cands rooms, of map[uint64]bool) (map[uint64][]uint64, error) {
	if len(cands) == 0 {
		return map[uint64][]uint64{}, nil
	}
	return d.sharedReplay(ctx, nil, &replayAsk{holders: cands, of: of})
}

// sharedReplay answers ask: victims' lineage from the cache when it holds
// them, under the same placeholder set; otherwise (or when holders are
// asked) it replays, for ask and the victims known so far, and keeps the
// victims' lineage (d.replay.res). It returns the holders asked about.
func (d *Dataset) sharedReplay(ctx context.Context, placeholder map[uint64]bool, ask *replayAsk) (map[uint64][]uint64, error) {
	held := map[uint64][]uint64{}
	if (len(ask.writers) == 0 && len(ask.holders) == 0) || d.Cfg.SkipReplay {
		return held, nil
	}
	pr, err := d.Pages(ctx)
	if err != nil {
		return nil, err
	}
	nw, nph := d.noted.wants(d, pr)
	ph := map[uint64]bool{}
	for r := range placeholder {
		ph[r] = true
	}
	for r := range nph {
		ph[r] = true
	}
	c := d.replay
	valid := c != nil && sameSet(c.placeholder, ph)
	missing := !valid || len(ask.holders) > 0
	for r := range ask.writers {
		if !valid || !c.asked[r] {
			missing = true
			break
		}
	}
	if missing {
		writers := map[uint64]bool{}
		for _, m := range []map[uint64]bool{ask.writers, nw} {
			for r := range m {
				writers[r] = true
			}
		}
		passes := 0
		if c != nil {
			passes = c.passes
			if valid {
				for r := range c.asked {
					writers[r] = true
				}
			}
		}
		set, h, err := replayLineage(ctx, d, ph, &replayAsk{writers: writers, holders: ask.holders, of: ask.of})
		if err != nil {
			return nil, err
		}
		// The answers replaced are not closed: a view of them may still
		// be read; the collector frees them (and their file) after.
		d.replay = &sharedReplay{asked: writers, placeholder: ph, res: set, passes: passes + 1}
		held = h
	}
	return held, nil
}

// dropReplayAnswers lets go of the shared replay's answers, keeping only
// how many replays ran: a later question replays again. The Runner drops
// them once its reconstruction has built the list, before the list is
// stored: at scale 100 the victims' answers were 91 MiB of the 623 in use
// while the list's INSERT was encoded. They are on local disk now
// (lineageSet); dropping them closes their file.
func (d *Dataset) dropReplayAnswers() {
	if d.replay != nil {
		d.replay.res.close()
		d.replay = &sharedReplay{passes: d.replay.passes}
	}
}

func sameSet(a, b map[uint64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
