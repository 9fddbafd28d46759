package chstore

import (
	"strings"
	"testing"
)

// The scan bench analyze compares with reads the columns the analysis
// reads: when a scan of the analysis drops or adds a column, its baseline
// must too, or the ratio compares different work.
func TestBenchScansReadTheAnalysisColumns(t *testing.T) {
	cols := func(sql string) string {
		sel, _, ok := strings.Cut(sql, "FROM")
		if !ok || !strings.HasPrefix(sel, "SELECT ") {
			t.Fatalf("not a SELECT ... FROM: %q", sql)
		}
		return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimPrefix(sel, "SELECT "), ",", " ")), ",")
	}
	bench := map[string]string{}
	for _, sc := range benchAnalysisScans {
		bench[sc.name] = cols(sc.sql)
	}
	for _, tt := range []struct{ table, name, sql string }{
		{"engine_events", "anEngineEventsSQL", anEngineEventsSQL},
		{"engine_events", "anEngineByLinesSQL", anEngineByLinesSQL},
		{"gateway_responses", "anGatewaySQL", anGatewaySQL},
		{"gateway_responses", "anGatewayByLinesSQL", anGatewayByLinesSQL},
		{"transfer_events", "anTransferEventsSQL", anTransferEventsSQL},
		{"transfer_events", "anTransferByLinesSQL", anTransferByLinesSQL},
	} {
		if got, want := cols(tt.sql), bench[tt.table]; got != want {
			t.Errorf("%s reads %s; the bench's %s baseline reads %s", tt.name, got, tt.table, want)
		}
	}
}
