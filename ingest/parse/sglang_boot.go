package parse

import (
	"strings"
)

// parseBootLine recognises the startup facts of §a1–§a5 anywhere in msg.
func parseBootLine(msg string, ranks Ranks) (Parsed, bool) {
	var f *BootFacts
	switch {
	case strings.Contains(msg, "server_args=ServerArgs("):
		f = parseServerArgs(msg)
	case strings.Contains(msg, "max_total_num_tokens="):
		f = parseLimits(msg)
	case strings.Contains(msg, "Cache is allocated.") || strings.Contains(msg, "Cache VA upper bound.") ||
		strings.Contains(msg, "KV cache allocated."):
		f = parseKVAlloc(msg)
	case strings.Contains(msg, "Memory pool end."):
		f = &BootFacts{Fact: "memory_pool_end"}
		f.AvailMemGB, _ = floatAfter(msg, "avail mem=")
	case strings.Contains(msg, "Load weight end."):
		f = &BootFacts{Fact: "load_weight_end"}
		f.AvailMemGB, _ = floatAfter(msg, "avail mem=")
	case strings.Contains(msg, "The server is fired up and ready to roll!"):
		f = &BootFacts{Fact: "ready"}
	default:
		return Parsed{}, false
	}
	f.Ranks = ranks
	out := Parsed{Status: StatusParsed, Kind: KindBoot, Event: f.Fact, Boot: f}
	if f.Fact == "server_args" && len(f.ArgKeys) == 0 {
		out.Status, out.Reason = StatusMalformed, "server_args without key=value pairs"
	}
	if f.Fact == "limits" && f.MaxTotalNumTokens == 0 {
		out.Status, out.Reason = StatusMalformed, "limits line without max_total_num_tokens"
	}
	return out, true
}

// parseServerArgs reads the ServerArgs dataclass repr (§a1) by field name;
// field order and presence drift every release.
func parseServerArgs(msg string) *BootFacts {
	f := &BootFacts{Fact: "server_args"}
	i := strings.Index(msg, "server_args=ServerArgs(")
	body, _, _ := pyBody(msg[i+len("server_args="):])
	pyKwargs(body, func(k, v string) bool {
		if k == "" {
			return true
		}
		f.ArgKeys = append(f.ArgKeys, k)
		f.ArgValues = append(f.ArgValues, pyText(v))
		f.setArg(k, v)
		return true
	})
	return f
}

func (f *BootFacts) setArg(k, v string) {
	u16 := func(dst *uint16) {
		if n, ok := pyUint(v); ok && n <= 0xffff {
			*dst = uint16(n)
		}
	}
	switch k {
	case "model_path":
		f.ModelPath, _ = pyString(v)
	case "tp_size":
		u16(&f.TPSize)
	case "dp_size":
		u16(&f.DPSize)
	case "pp_size":
		u16(&f.PPSize)
	case "ep_size":
		u16(&f.EPSize)
	case "page_size":
		if n, ok := pyUint(v); ok && n <= 0xffffffff {
			f.PageSize = uint32(n)
		}
	case "context_length":
		if n, ok := pyUint(v); ok && f.ContextLen == 0 {
			f.ContextLen = n
		}
	case "mem_fraction_static":
		f.MemFractionStatic, _ = pyFloat(v)
	case "max_total_tokens":
		f.MaxTotalTokens, _ = pyInt(v)
	case "chunked_prefill_size":
		if n, ok := pyInt(v); ok && f.ChunkedPrefillSize == 0 {
			f.ChunkedPrefillSize = n
		}
	case "max_running_requests":
		if n, ok := pyUint(v); ok && f.MaxRunningRequests == 0 {
			f.MaxRunningRequests = n
		}
	case "disaggregation_mode":
		f.DisaggregationMode, _ = pyString(v)
	case "disaggregation_transfer_backend":
		f.TransferBackend, _ = pyString(v)
	case "allow_auto_truncate":
		f.AllowAutoTruncate = strings.TrimSpace(v) == "True"
	}
}

// parseLimits reads the scheduler limits line (§a4), wherever it starts in
// the line (it is sometimes glued to "Memory pool end. avail mem=…").
func parseLimits(msg string) *BootFacts {
	f := &BootFacts{Fact: "limits", ChunkedPrefillSize: 0}
	i := strings.Index(msg, "max_total_num_tokens=")
	pyKwargs(msg[i:], func(k, v string) bool {
		switch k {
		case "max_total_num_tokens":
			f.MaxTotalNumTokens, _ = pyUint(v)
		case "chunked_prefill_size":
			f.ChunkedPrefillSize, _ = pyInt(v)
		case "max_prefill_tokens":
			f.MaxPrefillTokens, _ = pyUint(v)
		case "max_running_requests":
			f.MaxRunningRequests, _ = pyUint(v)
		case "context_len":
			f.ContextLen, _ = pyUint(v)
		case "available_gpu_mem", "available_cpu_mem":
			f.AvailMemGB, _ = pyFloat(strings.TrimSuffix(v, " GB"))
		}
		return true
	})
	if strings.Contains(msg[:i], "Memory pool end.") && f.AvailMemGB == 0 {
		f.AvailMemGB, _ = floatAfter(msg[:i], "avail mem=")
	}
	f.MaxReqInputLen = maxReqInputLen(f.ContextLen, f.MaxTotalNumTokens)
	return f
}

// maxReqInputLen derives the scheduler's input limit, which SGLang never
// logs (§a4, tp_worker.py get_worker_info):
// min(context_len-1, max_total_num_tokens-1) - 5, assuming attn_dcp_size 1.
// Zero when an input is unknown.
func maxReqInputLen(contextLen, maxTotal uint64) uint64 {
	if contextLen == 0 || maxTotal == 0 {
		return 0
	}
	m := min(contextLen, maxTotal) - 1
	if m < 5 {
		return 0
	}
	return m - 5
}

// parseKVAlloc reads the KV pool allocation line in all its variants (§a2):
//
//	KV Cache is allocated. #tokens: 105600, K size: 7.26 GB, V size: 7.26 GB
//	KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, KV size: 23.57 GB
//	SWA KV Cache is allocated. …   Mamba Cache is allocated. …
//	Post-capture KV sizing: KV cache allocated. dtype: …, #tokens: N, KV size: x GB, avail mem=y GB
func parseKVAlloc(msg string) *BootFacts {
	f := &BootFacts{Fact: "kv_allocated"}
	idx := -1
	for _, k := range [...]string{" is allocated.", " VA upper bound.", " allocated."} {
		if idx = strings.Index(msg, k); idx >= 0 {
			break
		}
	}
	name := msg[:max(idx, 0)]
	if j := strings.LastIndex(name, ": "); j >= 0 {
		name = name[j+2:]
	}
	f.KVCacheName = strings.TrimSpace(name)
	if f.KVCacheName == "KV cache" {
		f.KVCacheName = "KV Cache"
	}
	if d, ok := tokenAfter(msg, "dtype: ", ","); ok {
		f.KVDtype = d
	}
	if n, ok := uintAfter(msg, "#tokens: "); ok && !strings.HasPrefix(f.KVCacheName, "Mamba") {
		f.KVPoolTokens = n
	}
	if kv, ok := floatAfter(msg, "KV size: "); ok {
		f.KVSizeGB = kv
	} else {
		k, _ := floatAfter(msg, "K size: ")
		v, _ := floatAfter(msg, "V size: ")
		f.KVSizeGB = k + v
	}
	f.AvailMemGB, _ = floatAfter(msg, "avail mem=")
	return f
}
