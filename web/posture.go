package web

import (
	"context"
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/kvtrail/kvtrail/posture"
)

func init() { pageNames = append(pageNames, "fleet") }

// postureSource is what the fleet page reads: posture from node_boots,
// raw_lines and transfer_events (cmd/kvtrail wires posture.Load over the
// store).
type postureSource interface {
	Posture(ctx context.Context) (*posture.Fleet, error)
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
	if s.posture == nil {
		s.fail(c, errors.New("posture: no posture source is configured"))
		return
	}
	f, err := s.posture.Posture(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	s.respond(c, "fleet", "Fleet", FleetView{Latest: f.Latest(), Boots: f.Boots, Regressions: f.Regressions(), Bugs: f.Bugs})
}
