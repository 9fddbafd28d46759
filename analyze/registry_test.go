package analyze

import (
	"slices"
	"testing"
	"time"
)

func TestRegistry(t *testing.T) {
	// The run order reports and tests rely on.
	want := []string{"pool_below_context", "over_threshold", "rejected_served", "transfer_mismatch", "impossible_speed",
		"abort_reuse", "metadata_corruption", "transfer_failed_ok", "shared_room", "completeness"}
	if got := Names(); !slices.Equal(got[:len(want)], want) {
		t.Fatalf("run order = %v, want %v first", got, want)
	}
	for _, tc := range []struct {
		analyzer string
		min      Severity
		marks    bool
	}{
		{"over_threshold", High, true},
		{"abort_reuse", Medium, true},
		{"metadata_corruption", High, true},
		{"shared_room", High, true},
		{"pool_below_context", "", false},
		{"completeness", "", false},
		{"no_such_analyzer", "", false},
	} {
		min, ok := VictimSeverity(tc.analyzer)
		if ok != tc.marks || min != tc.min {
			t.Errorf("VictimSeverity(%s) = %q, %v; want %q, %v", tc.analyzer, min, ok, tc.min, tc.marks)
		}
	}
	// Config reaches the analyzers that take it.
	cfg := DefaultConfig()
	cfg.GapThreshold = 42 * time.Minute
	for _, a := range All(cfg) {
		if c, ok := a.(*Completeness); ok && c.GapThreshold != 42*time.Minute {
			t.Fatalf("completeness built with gap threshold %s", c.GapThreshold)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice must panic")
		}
	}()
	Register(Registration{New: func(Config) Analyzer { return &OverThreshold{} }})
}
