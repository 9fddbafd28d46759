package main

import (
	"context"

	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/posture"
)

// uiStore is the store the UI and API read through: the ClickHouse
// adapter's UI side, with the gap threshold the analyzers use, so the
// overview's gaps and the completeness analyzer's agree.
func (a *app) uiStore(s *chstore.Store) chstore.UIStore {
	return chstore.NewUIStore(s, a.analyzeConfig().GapThreshold)
}

// storePosture reads the fleet's posture for the fleet page.
type storePosture struct{ db posture.DB }

func (p storePosture) Posture(ctx context.Context) (*posture.Fleet, error) {
	return posture.Load(ctx, p.db)
}
