package simulate

import (
	"strconv"
	"time"
)

// reqLog is what a --log-requests Receive/Finish line shows for one side
// (prefill, decode or unified) of a request (reference §d).
type reqLog struct {
	rid        string
	room       uint64 // 0: non-PD, bootstrap fields are None
	bootHost   string
	maxNew     int
	text       string // only rendered at log level >= 2
	outText    string
	finishType string // "length", "stop", "abort"
	length     int    // for "length"
	abortMsg   string
	abortCode  int
	prompt     int
	completion int
	cached     int
	retract    int
	e2e        float64 // seconds
}

// pyRepr renders a Python str repr: single quotes, control characters and
// non-printables as \xNN, so hostile prompt text stays one line.
func pyRepr(b []byte, s string) []byte {
	b = append(b, '\'')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\'':
			b = append(b, '\\', '\'')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'x', hexdig[c>>4], hexdig[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '\'')
}

// jsonStr renders a JSON string the way Python's json.dumps does
// (ensure_ascii: non-ASCII and control characters as \uXXXX).
func jsonStr(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r < 0x20 || r > 0x7e:
			if r > 0xffff {
				r = 0xfffd
			}
			b = append(b, '\\', 'u', hexdig[r>>12&15], hexdig[r>>8&15], hexdig[r>>4&15], hexdig[r&15])
		default:
			b = append(b, byte(r))
		}
	}
	return append(b, '"')
}

func (n *node) appendObjText(b []byte, q *reqLog) []byte {
	b = append(b, "GenerateReqInput("...)
	if n.reqLevel >= 2 {
		b = append(b, "text="...)
		b = pyRepr(b, q.text)
		b = append(b, ", sampling_params={'max_new_tokens': "...)
		b = strconv.AppendInt(b, int64(q.maxNew), 10)
		b = append(b, ", 'temperature': 0.7}, "...)
	}
	b = append(b, "rid='"...)
	b = append(b, q.rid...)
	b = append(b, "', return_logprob=False, logprob_start_len=-1, top_logprobs_num=0, stream=True, log_metrics=True, return_hidden_states=False, "...)
	if q.room == 0 {
		b = append(b, "bootstrap_host=None, bootstrap_port=None, bootstrap_room=None"...)
	} else {
		b = append(b, "bootstrap_host='"...)
		b = append(b, q.bootHost...)
		b = append(b, "', bootstrap_port=8998, bootstrap_room="...)
		b = strconv.AppendUint(b, q.room, 10)
	}
	return append(b, ", bootstrap_pair_key=None, data_parallel_rank=None)"...)
}

func (n *node) appendObjJSON(b []byte, q *reqLog) []byte {
	b = append(b, '{')
	if n.reqLevel >= 2 {
		b = append(b, `"text": `...)
		b = jsonStr(b, q.text)
		b = append(b, `, "sampling_params": {"max_new_tokens": `...)
		b = strconv.AppendInt(b, int64(q.maxNew), 10)
		b = append(b, `, "temperature": 0.7}, `...)
	}
	b = append(b, `"rid": "`...)
	b = append(b, q.rid...)
	b = append(b, `", "stream": true, "log_metrics": true, `...)
	if q.room == 0 {
		b = append(b, `"bootstrap_host": null, "bootstrap_port": null, "bootstrap_room": null`...)
	} else {
		b = append(b, `"bootstrap_host": "`...)
		b = append(b, q.bootHost...)
		b = append(b, `", "bootstrap_port": 8998, "bootstrap_room": `...)
		b = strconv.AppendUint(b, q.room, 10)
	}
	return append(b, '}')
}

// appendMeta renders meta_info as a Python dict (text) or JSON object.
func (n *node) appendMeta(b []byte, q *reqLog, json bool) []byte {
	quote := byte('\'')
	if json {
		quote = '"'
	}
	key := func(b []byte, k string) []byte {
		b = append(b, quote)
		b = append(b, k...)
		return append(b, quote, ':', ' ')
	}
	str := func(b []byte, v string) []byte {
		if json {
			return jsonStr(b, v)
		}
		return pyRepr(b, v)
	}
	b = append(b, '{')
	if n.reqLevel >= 2 && q.outText != "" {
		b = key(b, "text")
		b = str(b, q.outText)
		b = append(b, ", "...)
	}
	b = key(b, "meta_info")
	b = append(b, '{')
	b = key(b, "id")
	b = str(b, q.rid)
	b = append(b, ", "...)
	b = key(b, "finish_reason")
	b = append(b, '{')
	b = key(b, "type")
	b = str(b, q.finishType)
	switch q.finishType {
	case "length":
		b = append(b, ", "...)
		b = key(b, "length")
		b = strconv.AppendInt(b, int64(q.length), 10)
	case "stop":
		b = append(b, ", "...)
		b = key(b, "matched")
		b = append(b, "151336"...)
	case "abort":
		b = append(b, ", "...)
		b = key(b, "message")
		b = str(b, q.abortMsg)
		b = append(b, ", "...)
		b = key(b, "status_code")
		b = strconv.AppendInt(b, int64(q.abortCode), 10)
		b = append(b, ", "...)
		b = key(b, "err_type")
		if json {
			b = append(b, "null"...)
		} else {
			b = append(b, "None"...)
		}
	}
	b = append(b, "}, "...)
	b = key(b, "prompt_tokens")
	b = strconv.AppendInt(b, int64(q.prompt), 10)
	b = append(b, ", "...)
	b = key(b, "weight_version")
	b = str(b, "default")
	b = append(b, ", "...)
	if n.version == v052 {
		b = key(b, "total_retractions")
	} else {
		b = key(b, "num_retractions")
	}
	b = strconv.AppendInt(b, int64(q.retract), 10)
	b = append(b, ", "...)
	b = key(b, "completion_tokens")
	b = strconv.AppendInt(b, int64(q.completion), 10)
	b = append(b, ", "...)
	b = key(b, "cached_tokens")
	b = strconv.AppendInt(b, int64(q.cached), 10)
	b = append(b, ", "...)
	b = key(b, "e2e_latency")
	b = appendFloat(b, q.e2e, 6)
	return append(b, "}}"...)
}

// appendIsoformat renders Python's naive datetime.isoformat(): the
// fraction is omitted when microseconds are zero.
func (n *node) appendIsoformat(b []byte, t int64) []byte {
	tm := time.Unix(0, n.log.unixNano(t)).UTC()
	b = tm.AppendFormat(b, "2006-01-02T15:04:05")
	if us := tm.Nanosecond() / 1000; us != 0 {
		b = append(b, '.')
		s := strconv.Itoa(us + 1_000_000)
		b = append(b, s[1:]...)
	}
	return b
}

// receive and finish are the tokenizer-process request logs (no rank prefix).
func (n *node) receive(t int64, q *reqLog) {
	b := n.begin(t, -1)
	if n.jsonReq {
		b = append(b, `{"timestamp": "`...)
		b = n.appendIsoformat(b, t)
		b = append(b, `", "event": "request.received", "rid": "`...)
		b = append(b, q.rid...)
		b = append(b, `", "obj": `...)
		b = n.appendObjJSON(b, q)
		b = append(b, '}')
	} else {
		b = append(b, "Receive: obj="...)
		b = n.appendObjText(b, q)
	}
	n.emit(b)
}

func (n *node) finish(t int64, q *reqLog) {
	b := n.begin(t, -1)
	if n.jsonReq {
		b = append(b, `{"timestamp": "`...)
		b = n.appendIsoformat(b, t)
		b = append(b, `", "event": "request.finished", "rid": "`...)
		b = append(b, q.rid...)
		b = append(b, `", "obj": `...)
		b = n.appendObjJSON(b, q)
		b = append(b, `, "out": `...)
		b = n.appendMeta(b, q, true)
		b = append(b, '}')
	} else {
		b = append(b, "Finish: obj="...)
		b = n.appendObjText(b, q)
		b = append(b, ", out="...)
		b = n.appendMeta(b, q, false)
	}
	n.emit(b)
}
