package analyze

import "testing"

// A margin line is kept when the core names its room or its rid (from a
// gateway response or an engine line), or, for a transfer line, when the
// other side's room is a core response's; nothing else is kept.
func TestSliceMarginKeepsWhatTheCoreNames(t *testing.T) {
	core := struct {
		gw     []*GatewayResponse
		engine []*EngineEvent
	}{
		gw: []*GatewayResponse{
			{Room: 11, PrefillRID: "p-11", DecodeRID: "d-11"},
			{Room: 12}, // no rids logged
		},
		engine: []*EngineEvent{
			{Room: 21, RID: "e-21"},
			{RID: "e-norooms"}, // a line without its room
		},
	}
	engine := []struct {
		name string
		line EngineEvent
		want bool
	}{
		{"the room of a core response", EngineEvent{Room: 11, RID: "other"}, true},
		{"the prefill rid of a core response", EngineEvent{RID: "p-11"}, true},
		{"the decode rid of a core response", EngineEvent{Room: 99, RID: "d-11"}, true},
		{"the room of a core engine line", EngineEvent{Room: 21}, true},
		{"the rid of a core engine line without a room", EngineEvent{RID: "e-norooms"}, true},
		{"a room and rid the core does not name", EngineEvent{Room: 99, RID: "x"}, false},
		{"no room, no rid", EngineEvent{}, false},
	}
	xfer := []struct {
		name string
		line TransferEvent
		want bool
	}{
		{"its own room is a core response's", TransferEvent{Room: 12}, true},
		{"its rid is a core engine line's", TransferEvent{RID: "e-21"}, true},
		{"the other side's room is a core response's", TransferEvent{Room: 98, OtherRoom: 11}, true},
		// A core engine line's room is not enough for the other side:
		// only the responses' rooms link that way.
		{"the other side's room is only a core engine line's", TransferEvent{Room: 98, OtherRoom: 21}, false},
		{"unrelated", TransferEvent{Room: 97, RID: "y", OtherRoom: 96}, false},
	}
	k := newCoreKeys(len(core.gw))
	for _, g := range core.gw {
		k.gateway(g)
	}
	for _, e := range core.engine {
		k.engine(e)
	}
	for _, tt := range engine {
		if got := k.keepsEngine(&tt.line); got != tt.want {
			t.Errorf("engine line, %s: kept %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, tt := range xfer {
		if got := k.keepsTransfer(&tt.line); got != tt.want {
			t.Errorf("transfer line, %s: kept %v, want %v", tt.name, got, tt.want)
		}
	}
}
