package parse

import (
	"strings"
)

// parseRejection recognises the request rejections of §c1–§c3. All of them
// end the request with HTTP 400 (FINISH_ABORT BAD_REQUEST, §c1/§c3).
func parseRejection(msg string, ranks Ranks) (Parsed, bool) {
	ev := EngineEvent{Ranks: ranks} // on the heap only when the line is one (below)
	e := &ev
	var ok1, ok2 bool
	switch {
	case strings.Contains(msg, "exceeds the maximum allowed length ("):
		// §c1: Input length (N tokens) exceeds the maximum allowed length (M tokens). …, self.rid='…'
		e.Event = "rejected"
		e.InputLen, ok1 = uintAfter(msg, "Input length (")
		e.LimitTokens, ok2 = uintAfter(msg, "exceeds the maximum allowed length (")
	case strings.Contains(msg, "Request length is longer than the KV cache pool size"):
		// §c1 with --allow-auto-truncate: len(req.origin_input_ids)=N, max_req_input_len=M.
		e.Event = "truncated"
		e.InputLen, ok1 = uintAfter(msg, "len(req.origin_input_ids)=")
		e.LimitTokens, ok2 = uintAfter(msg, "max_req_input_len=")
	case strings.Contains(msg, "is longer than the model's context length ("):
		// §c2 tokenizer side.
		e.Event = "context_exceeded"
		e.InputLen, ok1 = uintAfter(msg, "The input (")
		e.LimitTokens, ok2 = uintAfter(msg, "is longer than the model's context length (")
	case strings.Contains(msg, " exceeds the maximum number of tokens: "):
		// §c3: Request {rid} exceeds the maximum number of tokens: N > M
		e.Event = "capacity_exceeded"
		e.RID, _ = tokenAfter(msg, "Request ", " ")
		e.InputLen, ok1 = uintAfter(msg, "exceeds the maximum number of tokens: ")
		e.LimitTokens, ok2 = uintAfter(msg, "exceeds the maximum number of tokens: "+numRun(afterKey(msg, "exceeds the maximum number of tokens: "))+" > ")
	case strings.Contains(msg, " requires too many SWA KV tokens for decode preallocation: "):
		e.Event = "capacity_exceeded"
		e.RID, _ = tokenAfter(msg, "Request ", " ")
		k := "decode preallocation: "
		e.InputLen, ok1 = uintAfter(msg, k)
		e.LimitTokens, ok2 = uintAfter(msg, k+numRun(afterKey(msg, k))+" > ")
	case strings.Contains(msg, "SWA eviction insufficient: needed="):
		// decode.py _reclaim_swa_tail_capacity (since #27770): the decode
		// side cannot free enough sliding-window KV for the request and
		// aborts it (503). "SWA eviction insufficient: needed=N, available=M, req=RID"
		e.Event = "capacity_exceeded"
		e.InputLen, ok1 = uintAfter(msg, "needed=")
		e.LimitTokens, ok2 = uintAfter(msg, "available=")
		e.RID, _ = tokenAfter(msg, ", req=", " ,")
		e.StatusCode = 503
	case strings.Contains(msg, "After expanding "):
		// §c1 other callers: After expanding len(…)=X => N >= M.
		e.Event = "expand_exceeded"
		e.InputLen, ok1 = uintAfter(msg, "=> ")
		e.LimitTokens, ok2 = uintAfter(msg, " >= ")
	default:
		return Parsed{}, false
	}
	if e.StatusCode == 0 {
		e.StatusCode = 400
	}
	if rid, ok := pyValueAfter(msg, "self.rid="); ok {
		e.RID = rid
	}
	out := Parsed{Status: StatusParsed, Kind: KindEngine, Event: e.Event, Engine: e.clone(), RID: e.RID}
	if !ok1 || !ok2 {
		out.Status, out.Reason = StatusMalformed, e.Event+": token counts not found"
	}
	return out, true
}

func afterKey(s, key string) string {
	if i := strings.Index(s, key); i >= 0 {
		return s[i+len(key):]
	}
	return ""
}

// failureHeads are the per-request transfer failure lines of §c4.
var failureHeads = [...]struct{ head, event string }{
	{"Prefill bootstrap failed for request", "bootstrap_failed"},
	{"Prefill transfer failed for request", "prefill_transfer_failed"},
	{"Decode handshake failed for request", "decode_handshake_failed"},
	{"Decode transfer failed for request", "decode_transfer_failed"},
}

// parseTransferFailure recognises the bootstrap/transfer/metadata problems
// of §c4–§c5.
func parseTransferFailure(msg string, ranks Ranks) (Parsed, bool) {
	tv := TransferEvent{Ranks: ranks, Source: "sglang", MetadataIndex: -1} // copied to the heap by transferOut
	t := &tv
	bad := ""
	for _, h := range failureHeads {
		i := strings.Index(msg, h.head)
		if i < 0 {
			continue
		}
		// … rank=0 decode_req.req.rid='…' decode_req.req.bootstrap_room=N with exception KVTransferError(bootstrap_room=N): reason
		t.Event = h.event
		body := msg[i+len(h.head):]
		if n, ok := intAfter(body, "rank="); ok && t.Ranks.TP < 0 && n >= 0 && n < 1<<15 {
			t.Ranks.TP = int16(n)
		}
		head, exc, _ := strings.Cut(body, " with exception ")
		if rid, ok := pyValueAfter(head, "rid="); ok && rid != "None" {
			t.RID = rid
		} else {
			bad = "rid not found"
		}
		t.BootstrapRoom, _ = uintAfter(head, "bootstrap_room=")
		if strings.HasPrefix(exc, "KVTransferError(") {
			if room, ok := uintAfter(exc, "KVTransferError(bootstrap_room="); ok && t.BootstrapRoom == 0 {
				t.BootstrapRoom = room
			}
			if _, r, ok := strings.Cut(exc, "): "); ok {
				exc = r
			}
		}
		t.Reason = strings.TrimSpace(exc)
		t.Peer = reasonPeer(t.Reason)
		return transferOut(t, bad), true
	}
	switch {
	case strings.Contains(msg, "Context corruption detected: Request "):
		// Request {rid} (bootstrap_room={expected}) received metadata from bootstrap_room={actual}. Metadata buffer index: {idx}.
		t.Event = "context_corruption"
		t.RID, _ = tokenAfter(msg, "Context corruption detected: Request ", " ")
		var ok1, ok2 bool
		t.BootstrapRoom, ok1 = uintAfter(msg, "(bootstrap_room=")
		t.OtherRoom, ok2 = uintAfter(msg, "received metadata from bootstrap_room=")
		if n, ok := intAfter(msg, "Metadata buffer index: "); ok {
			t.MetadataIndex = n
		}
		if !ok1 || !ok2 {
			bad = "rooms not found"
		}
		t.Reason = "Context corruption detected: " + afterKey(msg, "Context corruption detected: ")
	case strings.Contains(msg, "Metadata unexpectedly not ready after readiness gate:"):
		// request {rid}, bootstrap_room={room}, metadata_buffer_index={idx}
		t.Event = "metadata_not_ready"
		t.RID, _ = tokenAfter(msg, "readiness gate: request ", ", ")
		t.BootstrapRoom, _ = uintAfter(msg, "bootstrap_room=")
		if n, ok := intAfter(msg, "metadata_buffer_index="); ok {
			t.MetadataIndex = n
		}
		t.Reason = "Metadata unexpectedly " + afterKey(msg, "Metadata unexpectedly ")
	case strings.Contains(msg, "Lost connection with prefill instance (bootstrap_addr: ") ||
		strings.Contains(msg, "Losing connection with prefill instance (bootstrap_addr: "):
		t.Event = "lost_connection"
		t.Peer, _ = tokenAfter(msg, "(bootstrap_addr: ", ")")
		t.Reason = msg
		if i := strings.Index(msg, "Los"); i >= 0 {
			t.Reason = msg[i:]
		}
	case strings.Contains(msg, "Prefill server with bootstrap_addr: "):
		t.Event = "prefill_down"
		t.Peer, _ = tokenAfter(msg, "Prefill server with bootstrap_addr: ", " ")
		t.BootstrapRoom, _ = uintAfter(msg, "(bootstrap_room: ")
		t.Reason = "Prefill server with " + afterKey(msg, "Prefill server with ")
	case strings.Contains(msg, "Some requests timed out when bootstrapping"):
		t.Event = "bootstrap_timeout_warning"
		t.Reason = strings.TrimSpace(afterKey(msg, "Some requests "))
	case strings.Contains(msg, "Some requests fail to receive KV Cache transfer done signal"):
		t.Event = "waiting_timeout_warning"
		t.Reason = strings.TrimSpace(afterKey(msg, "Some requests "))
	case strings.Contains(msg, "len(chunked_dst_kv_indice) = "):
		t.Event = "kv_indices_mismatch"
		t.Reason = "len(chunked_dst_kv_indice) = " + afterKey(msg, "len(chunked_dst_kv_indice) = ")
	case strings.Contains(msg, "AUX_DATA length mismatch for bootstrap_room "):
		t.Event = "aux_mismatch"
		t.BootstrapRoom, _ = uintAfter(msg, "bootstrap_room ")
		t.Reason = "AUX_DATA length mismatch"
	case strings.Contains(msg, "Could not fetch prefill parallel info from "):
		t.Event = "fetch_info_failed"
		t.Reason = "Could not fetch prefill parallel info from " + afterKey(msg, "Could not fetch prefill parallel info from ")
		addr := strings.TrimPrefix(afterKey(msg, "Could not fetch prefill parallel info from "), "bootstrap_addr: ")
		t.Peer, _ = tokenAfter(addr, "", " ")
	case strings.Contains(msg, "Skip sending kv chunk for request "):
		// prefill.py v0.4.6–v0.5.10 (INFO): Skip sending kv chunk for request
		// req.rid='…' req.bootstrap_room=N because page_indices is empty
		t.Event = "kv_chunk_skipped"
		if rid, ok := pyValueAfter(msg, "rid="); ok {
			t.RID = rid
		}
		t.BootstrapRoom, _ = uintAfter(msg, "bootstrap_room=")
		t.Reason = strings.TrimSpace(afterKey(msg, " because "))
		if t.RID == "" {
			bad = "rid not found"
		}
	case strings.Contains(msg, "send_kv_chunk skip: rid="):
		// main (DEBUG): send_kv_chunk skip: rid=%s start_send_idx=%s end_idx=%s
		t.Event = "kv_chunk_skipped"
		t.RID, _ = tokenAfter(msg, "send_kv_chunk skip: rid=", " ")
		t.Reason = "send_kv_chunk skip: " + afterKey(msg, "send_kv_chunk skip: ")
	case strings.Contains(msg, "Attempting to reconnect to "):
		// mooncake/conn.py, common/conn.py: Attempting to reconnect to {bootstrap_addr}...
		t.Event = "reconnect_attempt"
		addr, _ := tokenAfter(msg, "Attempting to reconnect to ", " ")
		t.Peer = strings.TrimRight(addr, ".")
		t.Reason = "Attempting to reconnect to " + afterKey(msg, "Attempting to reconnect to ")
	case strings.Contains(msg, "disaggregation mode warm Up Failed"), strings.Contains(msg, "Disaggregation warmup failed (mode="):
		// http_server.py v0.5.0–v0.5.15: Prefill disaggregation mode warm Up Failed, status code: {}
		// v0.5.16 on (#30748, INFO): Disaggregation warmup failed (mode=%s), status codes: %s
		t.Event = "warmup_failed"
		t.Reason = msg
		for _, k := range [...]string{"Prefill disaggregation", "Disaggregation warmup failed"} {
			if i := strings.Index(msg, k); i >= 0 {
				t.Reason = msg[i:]
				break
			}
		}
	case strings.Contains(msg, "Unexpected transfer worker error for room "), strings.Contains(msg, "NIXL transport error for room "):
		// nixl/conn.py transfer_worker, the prefill side's sender: a
		// logger.exception (its traceback follows) or, for transport
		// errors, a warning with the error. The room is all that names
		// the request; "Prefill transfer failed for request" with the rid
		// comes later from the scheduler, if at all.
		t.Event = "prefill_transfer_failed"
		k := "for room "
		t.BootstrapRoom, _ = uintAfter(msg, k)
		t.Reason = strings.TrimSpace(afterKey(afterKey(msg, k), ": "))
		if t.Reason == "" {
			t.Reason = "unexpected transfer worker error"
		}
		if t.BootstrapRoom == 0 {
			bad = "room not found"
		}
	case strings.Contains(msg, "Deferred KV release "):
		// decode.py resolve_deferred_releases (since #35049, with
		// SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE on): an aborted
		// request's pages, held until every prefill rank acked the drain
		// of its transfer, are released without that ack ("… for room N
		// timed out after 30.0s without a full drain ack from prefill;
		// releasing anyway.", WARNING) or the release raised ("… failed
		// for room N", with a traceback). Not a transfer failure of the
		// request, which failed before; the first is the moment its pages
		// went back to the free list unconfirmed.
		k := "Deferred KV release for room "
		t.Event = "deferred_release_timeout" // domain.EventDeferredReleaseTimeout
		if strings.Contains(msg, "Deferred KV release failed for room ") {
			k, t.Event = "Deferred KV release failed for room ", "deferred_release_error"
		}
		t.BootstrapRoom, _ = uintAfter(msg, k)
		t.Reason = "Deferred KV release " + afterKey(msg, "Deferred KV release ")
		if t.BootstrapRoom == 0 {
			bad = "room not found"
		}
	case strings.Contains(msg, "Prefill transfer kvcache error"):
		t.Event = "transfer_error"
		t.Reason = "Prefill transfer kvcache error" + afterKey(msg, "Prefill transfer kvcache error")
	case strings.Contains(msg, "exceeds target token slot size") || strings.Contains(msg, "] slice size ("):
		// [{mooncake_session_id}] slice size ({x}) exceeds target token slot size ({y})
		t.Event = "slice_size_mismatch"
		t.Peer, _ = tokenAfter(afterKey(msg, "["), "", "]")
		t.Reason = "slice size (" + afterKey(msg, "slice size (")
	case strings.Contains(msg, "len(prefill_state_indices) = "):
		t.Event = "state_indices_mismatch"
		t.Reason = "len(prefill_state_indices) = " + afterKey(msg, "len(prefill_state_indices) = ")
	case strings.Contains(msg, "from bootstrap: ") && strings.Contains(msg, "Error fetching prefill"),
		strings.Contains(msg, "Failed to get prefill parallel info: "), strings.Contains(msg, "Failed to get prefill server info: "),
		strings.Contains(msg, "Prefill instance failed to connect to bootstrap server"),
		strings.Contains(msg, "Prefill instance failed to register to bootstrap server"),
		strings.Contains(msg, "Could not fetch bootstrap info for"):
		// common/conn.py bootstrap-server errors (both roles).
		t.Event = "bootstrap_server_error"
		t.Reason = msg
		for _, k := range [...]string{"Error fetching", "Failed to get", "Prefill instance", "Could not fetch"} {
			if i := strings.Index(msg, k); i >= 0 {
				t.Reason = msg[i:]
				break
			}
		}
		t.Peer, _ = tokenAfter(t.Reason, "bootstrap_addr: ", " ,")
	default:
		// Session {ip:port} failed. / Session {id} recovered via probe (§c5)
		i := strings.Index(msg, "Session ")
		if i < 0 {
			return Parsed{}, false
		}
		rest := msg[i+len("Session "):]
		id, tail, ok := strings.Cut(rest, " ")
		switch {
		case ok && strings.HasPrefix(tail, "failed."):
			t.Event = "session_failed"
		case ok && strings.HasPrefix(tail, "recovered via probe"):
			t.Event = "session_recovered"
		default:
			return Parsed{}, false
		}
		t.Peer, t.Reason = id, msg[i:]
	}
	return transferOut(t, bad), true
}

// transferOut returns a heap copy of *t as the result, so that callers
// can fill in a TransferEvent on the stack and pay for the allocation only
// when the line is one.
func transferOut(t *TransferEvent, bad string) Parsed {
	c := new(TransferEvent)
	*c = *t
	out := Parsed{Status: StatusParsed, Kind: KindTransfer, Event: t.Event, Transfer: c,
		RID: t.RID, BootstrapRoom: t.BootstrapRoom}
	if bad != "" {
		out.Status, out.Reason = StatusMalformed, t.Event+": "+bad
	}
	return out
}

// reasonPeer extracts the remote endpoint named in a KVTransferError
// reason (§c5 table), if any.
func reasonPeer(reason string) string {
	if p, ok := tokenAfter(reason, "(bootstrap_addr: ", ")"); ok {
		return p
	}
	if p, ok := tokenAfter(reason, "bootstrap_addr: ", " "); ok {
		return p
	}
	if p, ok := tokenAfter(reason, "remote mooncake session ", " "); ok {
		return p
	}
	if strings.HasPrefix(reason, "Failed to send ") {
		if i := strings.LastIndex(reason, " to "); i >= 0 {
			return reason[i+4:]
		}
	}
	for _, k := range [...]string{" to prefill ", "prefill "} {
		if p, ok := tokenAfter(reason, k, " "); ok && strings.Contains(p, ":") {
			return p
		}
	}
	return ""
}

// clone returns a heap copy of e (see transferOut).
func (e *EngineEvent) clone() *EngineEvent {
	c := new(EngineEvent)
	*c = *e
	return c
}
