package web

import (
	"context"
	"time"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/posture"
)

// testGapThreshold is the analyzers' default gap threshold, which serve
// wires into the UI store.
const testGapThreshold = 10 * time.Minute

// testStore is the UI store over a test database, as serve wires it.
func testStore(st *chstore.Store) chstore.UIStore { return chstore.NewUIStore(st, testGapThreshold) }

// testPosture reads the fleet page's posture over a test database, as
// serve wires it.
type testPosture struct{ db posture.DB }

func (p testPosture) Posture(ctx context.Context) (*posture.Fleet, error) {
	return posture.Load(ctx, p.db)
}
