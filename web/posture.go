package web

import (
	"context"
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/kvtrail/kvtrail/posture"
)

func init() { pageNames = append(pageNames, "fleet") }

// postureSource is implemented by the ClickHouse store: the fleet page
// reads posture straight from node_boots, raw_lines and transfer_events.
type postureSource interface {
	Posture(ctx context.Context) (*posture.Fleet, error)
}

// Posture implements postureSource.
func (st chStore) Posture(ctx context.Context) (*posture.Fleet, error) {
	db, ok := st.c.(posture.DB)
	if !ok {
		return nil, errors.New("posture: the store cannot read posture")
	}
	return posture.Load(ctx, db)
}

// FleetView is the Fleet page and /api/v1/posture: each node's latest
// boot, every boot (for the history), regressions and the bug table.
type FleetView struct {
	Latest      []*posture.BootPosture `json:"latest"`
	Boots       []*posture.BootPosture `json:"boots"`
	Regressions []posture.Regression   `json:"regressions"`
	Bugs        []posture.Bug          `json:"known_bugs"`
}

func (s *server) fleetPage(c *gin.Context) {
	src, ok := s.overview.(postureSource)
	if !ok {
		s.fail(c, errors.New("posture: the store cannot read posture"))
		return
	}
	f, err := src.Posture(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	s.respond(c, "fleet", "Fleet", FleetView{Latest: f.Latest(), Boots: f.Boots, Regressions: f.Regressions(), Bugs: f.Bugs})
}
