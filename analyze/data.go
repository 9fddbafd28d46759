package analyze

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// The evidence, under the names analyze has always used (domain/).
type (
	// Boot is one engine start and the limits in force until the node's
	// next boot.
	Boot = domain.Boot
	// Boots indexes boots by node.
	Boots = domain.Boots
	// EngineEvent is one engine_events row.
	EngineEvent = domain.EngineEvent
	// TransferEvent is one transfer_events row.
	TransferEvent = domain.TransferEvent
	// GatewayResponse is one gateway_responses row.
	GatewayResponse = domain.GatewayResponse
)

// loadEngine reads the engine lines of [from, to] (whole seconds).
func loadEngine(ctx context.Context, db Evidence, from, to time.Time) ([]*EngineEvent, error) {
	var out []*EngineEvent
	err := db.ScanEngineEvents(ctx, from, to, func(e *EngineEvent) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// loadTransfer reads the transfer lines of [from, to] (whole seconds).
func loadTransfer(ctx context.Context, db Evidence, from, to time.Time) ([]*TransferEvent, error) {
	var out []*TransferEvent
	err := db.ScanTransferEvents(ctx, from, to, func(t *TransferEvent) error {
		out = append(out, t)
		return nil
	})
	return out, err
}

// coreKeys are the rooms and rids a slice's core span names: its gateway
// responses' rooms and rids and its engine lines' (reference: a line of
// a margin links to a request of the core only through one of these).
type coreKeys struct {
	gwRooms, engRooms map[uint64]bool
	rids              map[string]bool
}

// newCoreKeys sizes the keys for a core of about requests requests (a
// room each, a rid on each side): grown from empty, the maps were
// rehashed on the way, about half of their inserts' time.
func newCoreKeys(requests int) *coreKeys {
	return &coreKeys{gwRooms: make(map[uint64]bool, requests), engRooms: make(map[uint64]bool, requests),
		rids: make(map[string]bool, 2*requests)}
}

func (k *coreKeys) gateway(g *GatewayResponse) {
	k.gwRooms[g.Room] = true
	k.rids[g.PrefillRID] = true
	k.rids[g.DecodeRID] = true
}

func (k *coreKeys) engine(e *EngineEvent) {
	k.engRooms[e.Room] = true
	k.rids[e.RID] = true
}

// names reports whether a line with this room and rid can link to a
// request of the core.
func (k *coreKeys) names(room uint64, rid string) bool {
	if room != 0 && (k.gwRooms[room] || k.engRooms[room]) {
		return true
	}
	return rid != "" && k.rids[rid]
}

// keepsEngine reports whether a margin's engine line can link to a
// request of the core.
func (k *coreKeys) keepsEngine(e *EngineEvent) bool { return k.names(e.Room, e.RID) }

// keepsTransfer reports whether a margin's transfer line can link to a
// request of the core: by its own room or rid, or by the other side's
// room when a core response has it.
func (k *coreKeys) keepsTransfer(t *TransferEvent) bool {
	return k.names(t.Room, t.RID) || (t.OtherRoom != 0 && k.gwRooms[t.OtherRoom])
}

// loadLinked reads a slice's lines: the gateway responses of the core
// span (the requests it links, returned), every engine and transfer line
// of the core, and in the margins [lo, core) and (core, hi] only the lines
// that can link to a request of the core (the rooms and rids its
// responses and engine lines name), so a slice's memory follows its
// requests, not how dense the traffic around it is. The margins are read
// whole and filtered here: a margin is LinkMargin wide, while the
// server-side semi-join this replaces read the core span again for each
// of its five sets and each margin. The lines come in time order, as a
// whole read gives them.
func loadLinked(ctx context.Context, db Evidence, d *Dataset, core Window, lo, hi time.Time) ([]*GatewayResponse, error) {
	cf, ct := core.From.Truncate(time.Second), core.To.Truncate(time.Second)
	// The keys come from the responses of the core's whole seconds, as its
	// engine lines are read; the slice links those within core.
	read, err := loadGateway(ctx, db, Window{From: cf, To: ct.Add(time.Second)})
	if err != nil {
		return nil, err
	}
	keys := newCoreKeys(len(read))
	gw := read[:0] // the core's, in place
	for _, g := range read {
		keys.gateway(g)
		if core.Contains(g.TS) {
			gw = append(gw, g)
		}
	}
	coreE, err := loadEngine(ctx, db, cf, ct)
	if err != nil {
		return nil, err
	}
	for _, e := range coreE {
		keys.engine(e)
	}
	addE := func(e *EngineEvent) error {
		if keys.keepsEngine(e) {
			d.Engine = append(d.Engine, e)
		}
		return nil
	}
	addT := func(t *TransferEvent) error {
		if keys.keepsTransfer(t) {
			d.Transfer = append(d.Transfer, t)
		}
		return nil
	}
	if err := db.ScanEngineEvents(ctx, lo, cf.Add(-time.Second), addE); err != nil {
		return nil, err
	}
	d.Engine = append(d.Engine, coreE...)
	if err := db.ScanEngineEvents(ctx, ct.Add(time.Second), hi, addE); err != nil {
		return nil, err
	}
	if err := db.ScanTransferEvents(ctx, lo, cf.Add(-time.Second), addT); err != nil {
		return nil, err
	}
	if err := db.ScanTransferEvents(ctx, cf, ct, func(t *TransferEvent) error { d.Transfer = append(d.Transfer, t); return nil }); err != nil {
		return nil, err
	}
	if err := db.ScanTransferEvents(ctx, ct.Add(time.Second), hi, addT); err != nil {
		return nil, err
	}
	return gw, nil
}

// loadGateway reads the gateway responses of w.
func loadGateway(ctx context.Context, db Evidence, w Window) ([]*GatewayResponse, error) {
	var out []*GatewayResponse
	err := db.ScanGatewayResponses(ctx, w, func(g *GatewayResponse) error {
		out = append(out, g)
		return nil
	})
	return out, err
}

// DataSpan returns the earliest and latest request time in the database
// and the ingest watermark (latest ingested_at), used when a window is not
// given.
func DataSpan(ctx context.Context, db Evidence) (from, to, watermark time.Time, err error) {
	sp, err := db.AnalysisDataSpan(ctx)
	return sp.From, sp.To, sp.Watermark, err
}

// endpointHost extracts the host of "http://10.0.0.11:30000" or
// "10.0.0.11:8998".
func endpointHost(ep string) string {
	if ep == "" {
		return ""
	}
	if strings.Contains(ep, "://") {
		if u, err := url.Parse(ep); err == nil {
			return u.Hostname()
		}
	}
	if i := strings.LastIndexByte(ep, ':'); i > 0 && !strings.Contains(ep[:i], ":") {
		return ep[:i]
	}
	return ep
}
