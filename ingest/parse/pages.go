package parse

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// pageParser parses kvtrail's page-level KV event lines (docs/formats.md,
// page_events):
//
//	{"ts": "2026-08-20T10:11:12.123456789Z", "node": "d1", "dp_rank": 0,
//	 "event": "write", "rid": "…", "bootstrap_room": 123, "pages": [1, 2]}
type pageParser struct{ opts ParseOptions }

type pageLine struct {
	TS            string          `json:"ts"`
	Node          string          `json:"node"`
	DPRank        *int16          `json:"dp_rank"`
	Event         string          `json:"event"`
	RID           string          `json:"rid"`
	BootstrapRoom json.RawMessage `json:"bootstrap_room"`
	Pages         []uint32        `json:"pages"`
}

func (p *pageParser) Parse(rec Record) Parsed {
	line := bytes.TrimSpace(rec.Raw)
	if len(line) == 0 {
		return unknown("empty line")
	}
	var l pageLine
	if err := json.Unmarshal(line, &l); err != nil {
		return malformed(KindPage, "", "page event json: "+err.Error())
	}
	pe := &PageEvent{Node: l.Node, DPRank: -1, Event: l.Event, RID: l.RID, Pages: l.Pages}
	if l.DPRank != nil {
		pe.DPRank = *l.DPRank
	}
	if len(l.BootstrapRoom) > 0 {
		room, ok := rawUint(l.BootstrapRoom)
		if !ok && rawString(l.BootstrapRoom) != "" {
			return malformed(KindPage, l.Event, "bad bootstrap_room "+string(l.BootstrapRoom))
		}
		pe.BootstrapRoom = room
	}
	out := Parsed{Status: StatusParsed, Kind: KindPage, Event: l.Event, Page: pe,
		RID: pe.RID, BootstrapRoom: pe.BootstrapRoom}
	t, err := time.Parse(time.RFC3339Nano, l.TS)
	switch {
	case err != nil:
		out.Status, out.Reason = StatusMalformed, "page event ts: "+strconv.Quote(l.TS)
	default:
		out.TS = p.opts.fix(t)
	}
	switch l.Event {
	case "alloc", "free", "write", "read":
	default:
		out.Status, out.Reason = StatusMalformed, "unknown page event "+strconv.Quote(l.Event)
	}
	return out
}
