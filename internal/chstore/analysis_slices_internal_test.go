package chstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// keyChunks keeps every key, in order, and no list's literal text over
// anListBytes unless a single key is longer than that.
func TestKeyChunks(t *testing.T) {
	long := strings.Repeat("x", anListBytes)
	var many []string
	for i := 0; i < 300_000; i++ {
		many = append(many, fmt.Sprintf(`k'\%07d`, i)) // 11 bytes, 26 escaped with separators
	}
	for _, tt := range []struct {
		name string
		keys []string
		want int
	}{
		{"none", nil, 0},
		{"one", []string{"a"}, 1},
		{"long key alone", []string{"a", long, "b"}, 3},
		{"many", many, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := keyChunks(tt.keys)
			if len(got) != tt.want {
				t.Fatalf("%d lists, want %d", len(got), tt.want)
			}
			var all []string
			for _, c := range got {
				size := 0
				for _, k := range c {
					size += 2*len(k) + 4
				}
				if size > anListBytes && len(c) > 1 {
					t.Errorf("a list of %d keys is %d bytes", len(c), size)
				}
				all = append(all, c...)
			}
			if !slices.Equal(all, tt.keys) {
				t.Error("keys lost or reordered")
			}
		})
	}
}

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
