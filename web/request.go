package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// requestStore is what the request timeline and evidence pages need.
type requestStore interface {
	// tenant, when the link knows it, makes the gateway row a primary-key
	// read; a wrong or empty tenant only costs time.
	RequestTimeline(ctx context.Context, requestID, tenant string, contextWindow time.Duration) (*Timeline, error)
	Lines(ctx context.Context, ids []uint64, near ...span) ([]RawLine, error)
}

// defaultContextSeconds is how far before and after a request the
// "what else ran on this decode rank" list looks; ?context= changes it.
const (
	defaultContextSeconds = 30
	maxContextSeconds     = 600
)

// lanes are the swimlanes in order.
var lanes = []string{"gateway", "prefill", "transfer", "decode"}

type requestView struct {
	*Timeline
	Lanes     []laneView `json:"-"`
	Swimlanes *Chart     `json:"-"`
	PoolChart *Chart     `json:"-"`
	// Clocks are the evidence lines' own times and the correction ingest
	// applied to each (by line id); Offsets fold them per node.
	Clocks  map[uint64]LineClock `json:"line_clocks"`
	Offsets []NodeOffset         `json:"clock_offsets"`
	// Drift is what this request's own times say about a node's clock
	// left uncorrected (lower bounds; empty when nothing can be seen).
	Drift []ClockDrift `json:"clock_drift"`
}

type laneView struct {
	Name   string
	Events []TimelineEvent
}

func (s *server) requestView(c *gin.Context) {
	id := c.Param("id")
	if !validUTF8Param(id) {
		s.fail(c, invalid("bad request id"))
		return
	}
	secs := defaultContextSeconds
	if v := c.Query("context"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxContextSeconds {
			s.fail(c, invalid("context must be 0-600 seconds"))
			return
		}
		secs = n
	}
	tenant := c.Query("tenant")
	if !validUTF8Param(tenant) {
		s.fail(c, invalid("bad tenant"))
		return
	}
	tl, err := s.requests.RequestTimeline(c.Request.Context(), id, tenant, time.Duration(secs)*time.Second)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !s.audit(c, principal(c), "request_view", map[string]any{"request_id": id, "tenant": tl.Request.Tenant, "context": secs}, 1, http.StatusOK) {
		return
	}
	v := requestView{Timeline: tl, PoolChart: poolChart(tl), Clocks: lineClocks(tl.Lines)}
	v.Offsets = nodeOffsets(tl.Lines, v.Clocks)
	v.Drift = requestDrift(tl)
	v.Swimlanes = swimlaneChart(tl, v.Offsets)
	for _, l := range lanes {
		lv := laneView{Name: l}
		for _, e := range tl.Events {
			if e.Lane == l {
				lv.Events = append(lv.Events, e)
			}
		}
		v.Lanes = append(v.Lanes, lv)
	}
	s.respond(c, "request", "Request "+shown(id, 80), v)
}

// evidenceView is one line with its node's own clock.
type evidenceView struct {
	RawLine
	Clock LineClock `json:"clock"`
}

// evidence shows one raw line in full (tables show at most maxShownLine).
func (s *server) evidence(c *gin.Context) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil {
		s.fail(c, invalid("line id must be an unsigned integer"))
		return
	}
	// Links carry the line's time (?at=Unix seconds), which turns the read
	// into a primary-key range; without it the line is looked up the slow way.
	var near []span
	if v := c.Query("at"); v != "" {
		at, err := strconv.ParseInt(v, 10, 64)
		if err != nil || at < 0 || at > 1<<33 {
			s.fail(c, invalid("at must be Unix seconds"))
			return
		}
		t := time.Unix(at, 0).UTC()
		near = append(near, span{From: t, To: t})
	}
	lines, err := s.requests.Lines(c.Request.Context(), []uint64{id}, near...)
	if err != nil {
		s.fail(c, err)
		return
	}
	if len(lines) == 0 {
		s.fail(c, errNotFound)
		return
	}
	if !s.audit(c, principal(c), "evidence_view", map[string]any{"line_id": strconv.FormatUint(id, 10)}, 1, http.StatusOK) {
		return
	}
	s.respond(c, "evidence", "Evidence line", evidenceView{RawLine: lines[0], Clock: newClockReader().clock(lines[0].LogFormat, lines[0].Line, lines[0].TSNS)})
}
