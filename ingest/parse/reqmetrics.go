package parse

import (
	"encoding/json"
	"strings"
)

// requestMetricsParser parses sglang-request-metrics-*.log (§d,
// observability/request_metrics_exporter.py): one JSON object per line,
// {"request_parameters": "<json of GenerateReqInput>", <meta_info keys>}.
type requestMetricsParser struct{ opts ParseOptions }

type requestMetricsLine struct {
	RequestParameters json.RawMessage `json:"request_parameters"`
	jsonMetaInfo
	RequestReceivedTS json.RawMessage `json:"request_received_ts"`
	RequestFinishedTS json.RawMessage `json:"request_finished_ts"`
}

func (p *requestMetricsParser) Parse(rec Record) Parsed {
	line := strings.TrimSpace(string(rec.Raw))
	if line == "" {
		return unknown("empty line")
	}
	var l requestMetricsLine
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		return malformed(KindEngine, "request_metrics", "request metrics json: "+err.Error())
	}
	e := &EngineEvent{Ranks: NoRanks, Event: "request_metrics"}
	applyMetaInfo(e, &l.jsonMetaInfo)
	// request_parameters is a JSON string holding a JSON object; accept an
	// inline object too.
	params := l.RequestParameters
	if len(params) > 0 && params[0] == '"' {
		var s string
		if json.Unmarshal(params, &s) == nil {
			params = json.RawMessage(s)
		}
	}
	var obj map[string]json.RawMessage
	if len(params) > 0 && json.Unmarshal(params, &obj) == nil {
		if rid := rawString(obj["rid"]); rid != "" && e.RID == "" {
			e.RID = rid
		}
		e.BootstrapHost = rawString(obj["bootstrap_host"])
		if n, ok := rawUint(obj["bootstrap_port"]); ok && n <= 0xffffffff {
			e.BootstrapPort = uint32(n)
		}
		e.BootstrapRoom, _ = rawUint(obj["bootstrap_room"])
	}
	out := Parsed{Status: StatusParsed, Kind: KindEngine, Event: e.Event, Engine: e,
		RID: e.RID, BootstrapRoom: e.BootstrapRoom}
	// The record time is the finish time; the file carries epoch seconds.
	if f, ok := rawFloat(l.RequestFinishedTS); ok {
		out.TS = p.opts.fix(epochTime(f, "s"))
	} else if f, ok := rawFloat(l.RequestReceivedTS); ok {
		out.TS = p.opts.fix(epochTime(f+e.E2ELatencyMs/1000, "s"))
	}
	if e.RID == "" {
		out.Status, out.Reason = StatusMalformed, "request metrics without id"
	}
	return out
}
