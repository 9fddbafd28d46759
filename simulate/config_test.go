package simulate

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Scenario: "clean", Seed: 1, Scale: 1, OutDir: "/tmp/x"}
	tests := []struct {
		name    string
		mut     func(*Config)
		wantErr string
	}{
		{"ok", func(*Config) {}, ""},
		{"unknown scenario", func(c *Config) { c.Scenario = "nope" }, "unknown scenario"},
		{"zero scale", func(c *Config) { c.Scale = 0 }, "scale"},
		{"retractions above half", func(c *Config) { c.Retractions = 0.6 }, "retractions"},
		{"negative days", func(c *Config) { c.Days = -1 }, "days"},
		{"too many nodes", func(c *Config) { c.Prefill = 1000 }, "prefill"},
		{"no out dir", func(c *Config) { c.OutDir = "" }, "out dir"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mut(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestMaxReqInputLen(t *testing.T) {
	tests := []struct{ pool, ctx, want int }{
		{681_280, 1_048_576, 681_274},         // incident: pool-bound
		{2 * 1_048_576, 1_048_576, 1_048_570}, // canary: context-bound
		{284_928, 1_048_576, 284_922},         // #30233 numbers
	}
	for _, tc := range tests {
		if got := maxReqInputLen(tc.pool, tc.ctx); got != tc.want {
			t.Errorf("maxReqInputLen(%d, %d) = %d, want %d", tc.pool, tc.ctx, got, tc.want)
		}
	}
}

func TestIDsUnique(t *testing.T) {
	g := idGen{seed: 5}
	rooms, ids := map[uint64]bool{}, map[string]bool{}
	for s := uint32(1); s < 50_000; s++ {
		r := g.room(s)
		if r == 0 || r >= 1<<63 || rooms[r] {
			t.Fatalf("bad or duplicate room %d for seq %d", r, s)
		}
		rooms[r] = true
		id := g.requestID(s)
		if ids[id] || len(id) != 33 {
			t.Fatalf("bad request id %q", id)
		}
		ids[id] = true
		if g.prefillRID(s) == g.decodeRID(s) {
			t.Fatal("prefill and decode rid equal")
		}
	}
}
