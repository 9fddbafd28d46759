package web

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/ingest/parse"
)

// LineClock is what an evidence line says about its node's clock. Ingest
// stores every time corrected: the source's clock_offset is added, and a
// log that writes no zone is read in the source's time zone
// (ingest/parse.ParseOptions). The offset itself is not stored, so it is
// recovered from the line: its own timestamp is parsed again as the node
// wrote it (read as UTC, no offset), and the difference to the stored time
// is the correction ingest applied.
type LineClock struct {
	// Logged is the time written in the line, as the node's clock read it
	// (its wall clock, printed as if UTC). Zero when the line carries no
	// time of its own (a pushed line stamped by its shipper, a traceback
	// line) or its format could not be read again.
	Logged time.Time `json:"logged,omitempty"`
	// Offset is stored time minus Logged: what ingest added (clock_offset,
	// plus the zone's offset for a log without one).
	Offset time.Duration `json:"offset_ns"`
	Known  bool          `json:"known"`
}

// OffsetText names the correction for people: "+2.000 s", "none".
func (c LineClock) OffsetText() string {
	return offsetText(c.Offset)
}

func offsetText(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	sign := "+"
	if d < 0 {
		sign, d = "−", -d
	}
	if d >= time.Hour {
		return sign + d.String()
	}
	return fmt.Sprintf("%s%.3f s", sign, d.Seconds())
}

// clockReader re-reads lines' own timestamps, one classifier per format and
// year (glog's short form has no year: the stored time's year completes it).
type clockReader struct {
	byKey map[string]*parse.Classifier
}

func newClockReader() *clockReader { return &clockReader{byKey: map[string]*parse.Classifier{}} }

// clock recovers one line's node clock and offset. Only the first physical
// line is read (the record's head carries its time).
func (r *clockReader) clock(format, line string, storedNS uint64) LineClock {
	if storedNS == 0 || line == "" {
		return LineClock{}
	}
	stored := time.Unix(0, int64(storedNS)).UTC()
	f := parse.Format(format)
	key := fmt.Sprintf("%s|%d", f, stored.Year())
	cl, ok := r.byKey[key]
	if !ok {
		var err error
		if cl, err = parse.NewClassifier(f, parse.ParseOptions{Location: time.UTC, Year: stored.Year()}); err != nil {
			if cl, err = parse.NewClassifier(parse.FormatUnknown, parse.ParseOptions{Location: time.UTC, Year: stored.Year()}); err != nil {
				return LineClock{}
			}
		}
		r.byKey[key] = cl
	}
	head := line
	if i := strings.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	p := cl.Parse(parse.Record{Raw: bytes.Clone([]byte(head)), Lines: 1, Length: int64(len(head))})
	if p.TS.IsZero() || p.TS.Unix() <= 0 {
		return LineClock{}
	}
	return LineClock{Logged: p.TS.UTC(), Offset: stored.Sub(p.TS), Known: true}
}

// lineClocks recovers the clock of every line, keyed by line id.
func lineClocks(lines []RawLine) map[uint64]LineClock {
	r := newClockReader()
	out := make(map[uint64]LineClock, len(lines))
	for _, l := range lines {
		out[l.LineID] = r.clock(l.LogFormat, l.Line, l.TSNS)
	}
	return out
}

// NodeOffset is the correction ingest applied to one node's lines on a
// page ("mixed" when its lines disagree, e.g. two sources of one node with
// different offsets).
type NodeOffset struct {
	Node   string        `json:"node"`
	Offset time.Duration `json:"offset_ns"`
	Mixed  bool          `json:"mixed,omitempty"`
	Lines  int           `json:"lines"`
}

// Text names the node's correction for a caption or tooltip.
func (n NodeOffset) Text() string {
	if n.Mixed {
		return "differs between its sources"
	}
	return offsetText(n.Offset)
}

// nodeOffsets folds the lines' clocks per node, in node order.
func nodeOffsets(lines []RawLine, clocks map[uint64]LineClock) []NodeOffset {
	by := map[string]*NodeOffset{}
	for _, l := range lines {
		c := clocks[l.LineID]
		if !c.Known {
			continue
		}
		n := by[l.Node]
		if n == nil {
			n = &NodeOffset{Node: l.Node, Offset: c.Offset}
			by[l.Node] = n
		}
		n.Lines++
		// Sub-millisecond differences are the line's own rounding.
		if d := n.Offset - c.Offset; d > time.Millisecond || d < -time.Millisecond {
			n.Mixed = true
		}
	}
	out := make([]NodeOffset, 0, len(by))
	for _, n := range by {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// clockTolerance is how far a request's engine lines may lie outside the
// gateway's span of the request without meaning anything: SGLang's text
// logs stamp whole seconds.
const clockTolerance = time.Second

// ClockDrift is what one request's own times say about a node's clock
// after ingest's correction. The gateway logs the request's start and
// duration; every engine line of the request was written within that
// span, so a line before its start means the node's clock (as corrected)
// is behind by at least the gap less the log's one-second resolution, and
// a line after its end means it is ahead. Zero on both sides says nothing:
// a skew smaller than the request's span cannot be seen from one request.
type ClockDrift struct {
	Node string `json:"node"`
	// Behind / Ahead are lower bounds, after clockTolerance.
	Behind time.Duration `json:"behind_at_least_ns,omitempty"`
	Ahead  time.Duration `json:"ahead_at_least_ns,omitempty"`
}

// Text says it for people.
func (d ClockDrift) Text() string {
	if d.Behind > 0 {
		return fmt.Sprintf("%s's lines for this request start before the gateway received it: its clock, as corrected, is behind by at least %.3f s", d.Node, d.Behind.Seconds())
	}
	return fmt.Sprintf("%s's lines for this request end after the gateway's response ended: its clock, as corrected, is ahead by at least %.3f s", d.Node, d.Ahead.Seconds())
}

// requestDrift checks each engine node's lines of the request against the
// gateway's span of it (a node with lines on both sides is left out: its
// lines disagree with each other, not only with the gateway).
func requestDrift(tl *Timeline) []ClockDrift {
	if tl == nil || tl.Request.TSNS == 0 || tl.Request.DurationMs < 0 {
		return nil
	}
	start := int64(tl.Request.TSNS)
	end := start + int64(tl.Request.DurationMs*float64(time.Millisecond))
	type span struct{ lo, hi int64 }
	by := map[string]*span{}
	for _, e := range tl.Events {
		if e.Lane == "gateway" || e.TSNS == 0 || e.Node == "" {
			continue
		}
		t := int64(e.TSNS)
		s := by[e.Node]
		if s == nil {
			by[e.Node] = &span{t, t}
			continue
		}
		s.lo, s.hi = min(s.lo, t), max(s.hi, t)
	}
	var out []ClockDrift
	for node, s := range by {
		behind := time.Duration(start-s.lo) - clockTolerance
		ahead := time.Duration(s.hi-end) - clockTolerance
		switch {
		case behind > 0 && ahead > 0:
		case behind > 0:
			out = append(out, ClockDrift{Node: node, Behind: behind})
		case ahead > 0:
			out = append(out, ClockDrift{Node: node, Ahead: ahead})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}
