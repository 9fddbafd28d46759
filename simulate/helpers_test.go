package simulate

import (
	"context"
	"testing"
)

func runScenario(tb testing.TB, name string, seed int64, scale float64, pageEvents bool) string {
	tb.Helper()
	dir := tb.TempDir()
	if _, err := Run(context.Background(), Config{Scenario: name, Seed: seed, Scale: scale, OutDir: dir, PageEvents: pageEvents}); err != nil {
		tb.Fatalf("Run(%s): %v", name, err)
	}
	return dir
}
