package domain

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/go-faster/city"
)

// IDsPerList is how many ids a caller that reads by list in batches puts
// in one batch. A read by list scans its table's time range whatever the
// list's length, so fuller batches read less; the batch bounds what its
// answer holds. (The store sends a list as a table beside its statement,
// so the list's length has no limit of its own.)
const IDsPerList = 190_650

// FactRow is one request_facts row as kvtrail saves a linked request: the
// one mapping from a Request to its saved columns, used by the store to
// write the row and by FactDigest to tell whether two sets of saved rows
// are the same.
type FactRow struct {
	Key, Tenant, Model, GatewayID string
	TS                            time.Time
	Room                          uint64
	Status                        uint16
	Prompt, Completion, Cached    uint64
	TTFTMs, DurationMs            float64

	PrefillNode, PrefillRID, PrefillFinish string
	PrefillRank                            int16
	PrefillPrompt, PrefillLimit            uint64
	Rejected                               uint8

	DecodeNode, DecodeRID, DecodeFinish string
	DecodeRank                          int16
	DecodePrompt                        uint64

	Failed, Corrupt uint8
	Reason, Links   string
	Lines           []uint64
}

// Row is f's request_facts row (without the version, which is the saving
// run's).
func (f *Request) Row() FactRow {
	r := FactRow{Key: f.Key, TS: f.TS, Tenant: f.Tenant, Model: f.Model, GatewayID: f.RequestID(), Room: f.Room,
		PrefillRank: -1, DecodeRank: -1, Links: f.Links(), Lines: f.Lines()}
	if g := f.GW; g != nil {
		r.Status, r.Prompt, r.Completion, r.Cached, r.TTFTMs, r.DurationMs = g.Status, g.Prompt, g.Completion, g.Cached, g.TTFTMs, g.DurationMs
	}
	if p := f.Prefill; p != nil {
		r.PrefillNode, r.PrefillRID, r.PrefillRank, r.PrefillPrompt = p.Node, p.RID, p.DPRank, p.Prompt()
		if p.Fin != nil {
			r.PrefillFinish = p.Fin.FinishType
		}
		if p.Boot != nil {
			r.PrefillLimit = p.Boot.Limit()
		}
	}
	if ok, _ := f.PrefillRejected(); ok {
		r.Rejected = 1
	}
	if d := f.Decode; d != nil {
		r.DecodeNode, r.DecodeRID, r.DecodeRank, r.DecodePrompt = d.Node, d.RID, d.DPRank, d.Prompt()
		if d.Fin != nil {
			r.DecodeFinish = d.Fin.FinishType
		}
		if r.Prompt == 0 {
			r.Prompt = r.DecodePrompt
		}
	}
	for _, t := range f.Transfer {
		if t.Failure() {
			r.Failed, r.Reason = 1, t.Reason
			break
		}
	}
	if len(f.Corrupt) > 0 {
		r.Corrupt = 1
	}
	return r
}

// FactDigest stands for a set of saved rows, whatever their order: their
// number and the sums (mod 2^64) of the two halves of each row's
// CityHash128. Two links that saved the same rows have the same digest;
// rows that differ in any column give a different one but for a 2^-128
// chance.
type FactDigest struct {
	N, Lo, Hi uint64
}

// Add counts r. buf is scratch space, returned for the next call.
func (d *FactDigest) Add(r *FactRow, buf []byte) []byte {
	b := buf[:0]
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	u := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	for _, s := range [...]string{r.Key, r.Tenant, r.Model, r.GatewayID, r.PrefillNode, r.PrefillRID, r.PrefillFinish,
		r.DecodeNode, r.DecodeRID, r.DecodeFinish, r.Reason, r.Links} {
		str(s)
	}
	for _, v := range [...]uint64{uint64(r.TS.UnixNano()), r.Room, uint64(r.Status), r.Prompt, r.Completion, r.Cached,
		math.Float64bits(r.TTFTMs), math.Float64bits(r.DurationMs), uint64(uint16(r.PrefillRank)), r.PrefillPrompt,
		r.PrefillLimit, uint64(r.Rejected), uint64(uint16(r.DecodeRank)), r.DecodePrompt, uint64(r.Failed),
		uint64(r.Corrupt), uint64(len(r.Lines))} {
		u(v)
	}
	for _, l := range r.Lines {
		u(l)
	}
	h := city.CH128(b)
	d.N++
	d.Lo += h.Low
	d.Hi += h.High
	return b
}

// Plus counts o's rows too: the digest of two disjoint sets of rows is
// the sum of theirs (how an analysis job's slices make one link's).
func (d *FactDigest) Plus(o FactDigest) {
	d.N += o.N
	d.Lo += o.Lo
	d.Hi += o.Hi
}

// FactLink records one linking of requests into request_facts (what
// `kvtrail ingest` does after its lines): the window linked, the version
// its rows were saved under, when it began, and what it saved: the
// requests the gateway logged, First to Last by time, and their digest.
// An analysis of a window whose requests one link saved, with no line
// ingested since it began, links the same rows; when their digest agrees
// it reads the link's rows as its own instead of saving them again.
type FactLink struct {
	Version     uint64
	From, To    time.Time // the window linked
	First, Last time.Time // the saved requests' earliest and latest time
	Digest      FactDigest
	LinkedAt    time.Time
}

// Saw widens First and Last to a saved request's time.
func (l *FactLink) Saw(ts time.Time) {
	if l.First.IsZero() || ts.Before(l.First) {
		l.First = ts
	}
	if ts.After(l.Last) {
		l.Last = ts
	}
}

// Join adds what another part of the same link saved: its rows' digest
// and their time span (a part that saved nothing has no span).
func (l *FactLink) Join(part FactLink) {
	if part.Digest.N == 0 {
		return
	}
	l.Digest.Plus(part.Digest)
	l.Saw(part.First)
	l.Saw(part.Last)
}
