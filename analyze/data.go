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

// loadLinked reads a slice's engine and transfer lines: every line of the
// core span (the requests it links), and in the margins [lo, core) and
// (core, hi] only the lines that can link to a request of the core (the
// store's semi-join), so a slice's memory follows its requests, not how
// dense the traffic around it is. The lines come in time order, as a
// whole read gives them.
func loadLinked(ctx context.Context, db Evidence, d *Dataset, core Window, lo, hi time.Time) error {
	cf, ct := core.From.Truncate(time.Second), core.To.Truncate(time.Second)
	addE := func(e *EngineEvent) error { d.Engine = append(d.Engine, e); return nil }
	addT := func(t *TransferEvent) error { d.Transfer = append(d.Transfer, t); return nil }
	if err := db.ScanLinkedEngineEvents(ctx, lo, cf.Add(-time.Second), core.From, core.To, addE); err != nil {
		return err
	}
	if err := db.ScanEngineEvents(ctx, cf, ct, addE); err != nil {
		return err
	}
	if err := db.ScanLinkedEngineEvents(ctx, ct.Add(time.Second), hi, core.From, core.To, addE); err != nil {
		return err
	}
	if err := db.ScanLinkedTransferEvents(ctx, lo, cf.Add(-time.Second), core.From, core.To, addT); err != nil {
		return err
	}
	if err := db.ScanTransferEvents(ctx, cf, ct, addT); err != nil {
		return err
	}
	return db.ScanLinkedTransferEvents(ctx, ct.Add(time.Second), hi, core.From, core.To, addT)
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
