package simulate

import "strconv"

const gatewayIP = "10.0.9.1"

// gatewayRecord is one canonical response line (docs/formats.md).
type gatewayRecord struct {
	start      int64
	requestID  string
	tenant     string
	model      string
	status     int
	prompt     int
	completion int
	cached     int
	ttftMS     float64
	durMS      float64
	prefillEP  string
	decodeEP   string
	room       uint64
	prefillRID string
	decodeRID  string
	gateway    string
	mode       string
}

// writeGateway renders the record by hand: it is the hottest JSON writer and
// every string in it is ASCII from the simulator (ids, names, URLs).
func writeGateway(lw *lineWriter, g *gatewayRecord) {
	b := append(lw.buf[:0], `{"ts":"`...)
	b = lw.appendRFC3339(b, g.start)
	b = append(b, `","request_id":`...)
	b = jsonStr(b, g.requestID)
	b = append(b, `,"tenant":`...)
	b = jsonStr(b, g.tenant)
	b = append(b, `,"model":`...)
	b = jsonStr(b, g.model)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(g.status), 10)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(g.prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(g.completion), 10)
	b = append(b, `,"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(g.cached), 10)
	b = append(b, `,"ttft_ms":`...)
	b = appendFloat(b, g.ttftMS, 3)
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, g.durMS, 3)
	b = append(b, `,"prefill_endpoint":`...)
	b = jsonStr(b, g.prefillEP)
	b = append(b, `,"decode_endpoint":`...)
	b = jsonStr(b, g.decodeEP)
	if g.room != 0 {
		b = append(b, `,"bootstrap_room":`...)
		b = strconv.AppendUint(b, g.room, 10)
	}
	b = append(b, `,"prefill_rid":`...)
	b = jsonStr(b, g.prefillRID)
	b = append(b, `,"decode_rid":`...)
	b = jsonStr(b, g.decodeRID)
	b = append(b, `,"gateway":`...)
	b = jsonStr(b, g.gateway)
	b = append(b, `,"mode":`...)
	b = jsonStr(b, g.mode)
	b = append(b, `,"method":"POST","path":"/v1/chat/completions","stream":true}`...)
	lw.buf = b
	lw.writeLine(b)
}
