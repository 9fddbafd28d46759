package parse

import (
	"strconv"
	"strings"
)

// parseBatch parses a scheduler batch line (§b1–§b4):
//
//	Prefill batch[ [N]](.|,) key: value, key: value, …
//
// The pair list drifted in every release (§b4), so every pair is kept and
// the renamed counters are mapped onto stable fields. A trailing ", " or " "
// (v0.4.6–v0.5.8) is harmless. The second result is false if msg is not a
// batch line at all.
func parseBatch(a *arena, msg string, ranks Ranks) (Parsed, bool) {
	var kind, rest string
	switch {
	case strings.HasPrefix(msg, "Prefill batch"):
		kind, rest = "prefill", msg[len("Prefill batch"):]
	case strings.HasPrefix(msg, "Decode batch"):
		kind, rest = "decode", msg[len("Decode batch"):]
	default:
		return Parsed{}, false
	}
	b := a.batch()
	*b = BatchStat{Ranks: ranks, Kind: kind, Iter: -1,
		RunningReq: -1, QueueReq: -1, BootstrapReq: -1, InflightReq: -1,
		PreallocReq: -1, TransferReq: -1, RetractedReq: -1}
	if strings.HasPrefix(rest, " [") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return malformed(KindBatch, kind, "unterminated batch iteration"), true
		}
		n, err := strconv.ParseInt(rest[2:end], 10, 64)
		if err != nil {
			return malformed(KindBatch, kind, "bad batch iteration "+strconv.Quote(rest[2:end])), true
		}
		b.Iter, rest = n, rest[end+1:]
	}
	if rest == "" || (rest[0] != '.' && rest[0] != ',') {
		return Parsed{}, false
	}
	rest = rest[1:]
	n := strings.Count(rest, ",") + 1
	kv := a.strings(2 * n) // keys and values share one array
	b.FieldKeys, b.FieldValues = kv[:0:n], kv[n:n:2*n]
	var bad string
	for rest != "" {
		var part string
		if i := strings.IndexByte(rest, ','); i >= 0 {
			part, rest = rest[:i], rest[i+1:]
		} else {
			part, rest = rest, ""
		}
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, ": ")
		if !ok {
			k, v = strings.TrimSuffix(part, ":"), ""
		}
		b.FieldKeys = append(b.FieldKeys, k)
		b.FieldValues = append(b.FieldValues, v)
		if !ok && rest == "" {
			break // the line was cut inside its last pair (terminal width, a paste)
		}
		if err := b.set(k, v); err != "" && bad == "" {
			bad = err
		}
	}
	out := Parsed{Status: StatusParsed, Kind: KindBatch, Event: kind, Batch: b}
	if len(b.FieldKeys) == 0 {
		out.Status, out.Reason = StatusMalformed, "batch line without fields"
	} else if bad != "" {
		out.Status, out.Reason = StatusMalformed, bad
	}
	return out, true
}

// set maps one pair onto the typed fields; it returns a reason when a
// known counter has an unreadable value.
func (b *BatchStat) set(k, v string) string {
	i32 := func(dst *int32) string {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return "bad value for " + k
		}
		*dst = int32(n)
		return ""
	}
	u64 := func(dst *uint64) string {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return "bad value for " + k
		}
		*dst = n
		return ""
	}
	f64 := func(dst *float64) string {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return "bad value for " + k
		}
		*dst = f
		return ""
	}
	switch k {
	case "#new-seq":
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return "bad value for " + k
		}
		b.NewSeq = uint32(n)
	case "#new-token":
		return u64(&b.NewToken)
	case "#cached-token":
		return u64(&b.CachedToken)
	case "#token":
		return u64(&b.NumToken)
	case "#full token", "#gpu token": // SWA / hisparse decode variants (§b3)
		if b.NumToken == 0 {
			return u64(&b.NumToken)
		}
	case "token usage":
		return f64(&b.TokenUsage)
	case "full token usage", "gpu token usage":
		if b.TokenUsage == 0 {
			return f64(&b.TokenUsage)
		}
	case "#running-req":
		return i32(&b.RunningReq)
	case "#queue-req":
		return i32(&b.QueueReq)
	// Prefill bootstrap queue: #unbootstrapped-req → #prealloc-req →
	// #bootstrap-req (§b4). On decode, #prealloc-req is the prealloc queue.
	case "#unbootstrapped-req", "#bootstrap-req":
		return i32(&b.BootstrapReq)
	case "#prealloc-req":
		if b.Kind == "prefill" {
			return i32(&b.BootstrapReq)
		}
		return i32(&b.PreallocReq)
	case "#transferring-req", "#inflight-req":
		return i32(&b.InflightReq)
	case "#transfer-req":
		return i32(&b.TransferReq)
	case "#retracted-req":
		return i32(&b.RetractedReq)
	case "input throughput (token/s)", "gen throughput (token/s)":
		return f64(&b.Throughput)
	}
	return ""
}
