package parse

import (
	"strings"
	"time"
)

// glogParser parses Mooncake transfer-engine glog lines (§g):
//
//	E0917 16:23:13.204995 4058290 worker_pool.cpp:294] msg       (short date)
//	I20251113 17:04:35.119301 12345 transfer_engine.cpp:10] msg  (newer glog)
//
// Year rule for the short form, in order: ParseOptions.Year if set; else
// the year of the last long-form line seen in this stream; else the year of
// ParseOptions.DefaultTime (e.g. the file mtime), minus one if the line's
// month is after DefaultTime's month; else the same rule against the
// current time. Whenever the month goes backwards from one line to the
// next by more than six months (December → January) the year advances. Years not configured or read
// from the line set Parsed.TSInferred.
type glogParser struct {
	opts      ParseOptions
	year      int // year in effect, 0 until known
	yearKnown bool
	longForm  bool // the year came from a long-form line of this stream
	lastMonth int
}

// observeYear takes the year from a full timestamp of another line of the
// same stream (an SGLang line next to the glog lines of a mixed stream): a
// better guess for the short form than the file's mtime. A configured year
// or a long-form glog line wins.
func (p *glogParser) observeYear(t time.Time) {
	if p.opts.Year != 0 || p.longForm || (p.yearKnown && p.year == t.Year()) {
		return
	}
	p.year, p.yearKnown, p.lastMonth = t.Year(), true, int(t.Month())
}

const glogPreamble = "WARNING: Logging before InitGoogleLogging() is written to STDERR"

func (p *glogParser) Parse(rec Record) Parsed {
	line := bytesView(rec.Raw) // read in place (see Parser)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSuffix(line[:i], "\r")
	}
	if strings.HasPrefix(line, glogPreamble) {
		return Parsed{Status: StatusParsed, Kind: KindMarker, Event: "glog_preamble"}
	}
	ts, inferred, msg, ok := p.prefix(line)
	if !ok {
		return unknown("no glog prefix")
	}
	out := glogMessage(msg)
	out.TS, out.TSInferred = p.opts.fix(ts), inferred
	return out
}

// prefix parses the glog header and returns the message after "] ".
func (p *glogParser) prefix(line string) (time.Time, bool, string, bool) {
	if len(line) < 22 || strings.IndexByte("IWEF", line[0]) < 0 {
		return time.Time{}, false, "", false
	}
	var year, mo, d int
	var i int
	inferred := false
	if len(line) > 9 && line[9] == ' ' && isDigits([]byte(line[1:9])) {
		year, _ = atoiN(line[1:5])
		mo, _ = atoiN(line[5:7])
		d, _ = atoiN(line[7:9])
		i = 10
		p.year, p.yearKnown, p.longForm = year, true, true
	} else if line[5] == ' ' && isDigits([]byte(line[1:5])) {
		mo, _ = atoiN(line[1:3])
		d, _ = atoiN(line[3:5])
		i = 6
		switch {
		case p.opts.Year != 0 && !p.yearKnown:
			p.year, p.yearKnown = p.opts.Year, true
		case !p.yearKnown:
			ref := p.opts.DefaultTime
			if ref.IsZero() {
				ref = time.Now().UTC()
			}
			p.year = ref.Year()
			if mo > int(ref.Month()) {
				p.year--
			}
			p.yearKnown = true
			inferred = true
		case p.lastMonth != 0 && p.lastMonth-mo > 6:
			p.year++ // December → January (small steps back are thread interleaving)
		}
		if p.opts.Year == 0 {
			inferred = true
		}
		year = p.year
	} else {
		return time.Time{}, false, "", false
	}
	if mo < 1 || mo > 12 || d < 1 || d > 31 {
		return time.Time{}, false, "", false
	}
	p.lastMonth = mo
	// hh:mm:ss.uuuuuu
	rest := line[i:]
	if len(rest) < 8 || rest[2] != ':' || rest[5] != ':' {
		return time.Time{}, false, "", false
	}
	h, ok1 := atoiN(rest[0:2])
	mi, ok2 := atoiN(rest[3:5])
	s, ok3 := atoiN(rest[6:8])
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || s > 60 {
		return time.Time{}, false, "", false
	}
	ns := 0
	j := 8
	if j < len(rest) && rest[j] == '.' {
		scale := 100000000
		for j++; j < len(rest) && rest[j] >= '0' && rest[j] <= '9'; j++ {
			ns += int(rest[j]-'0') * scale
			scale /= 10
		}
	}
	end := strings.Index(rest[j:], "] ")
	if end < 0 {
		if strings.HasSuffix(rest, "]") {
			end = len(rest) - j - 1
		} else {
			return time.Time{}, false, "", false
		}
	}
	msg := ""
	if j+end+2 <= len(rest) {
		msg = rest[j+end+2:]
	}
	t := time.Date(year, time.Month(mo), d, h, mi, s, ns, p.opts.loc())
	return t, inferred, msg, true
}

// sliceFailure is where the fields of a failed slice start in msg, -1
// when msg is not one. The worker pool logs "Worker: Process failed for
// slice (…): status" (§g); a line without "Worker: " was posted from
// worker_pool.cpp in Mooncake PR #3584 (2026-08-21, fields elided), and an
// early RDMA context read in the code index logged that form with no peer.
func sliceFailure(msg string) int {
	for _, h := range [...]string{"Worker: Process failed for slice (", "Process failed for slice ("} {
		if strings.HasPrefix(msg, h) {
			return len(h)
		}
	}
	return -1
}

// glogMessage extracts the Mooncake messages of §g.
func glogMessage(msg string) Parsed {
	tv := TransferEvent{Ranks: NoRanks, Source: "mooncake", MetadataIndex: -1} // copied to the heap by transferOut
	t := &tv
	switch {
	case sliceFailure(msg) >= 0:
		// (opcode: 1, …, local_nic: mlx5_7, peer_nic: 115.182.224.13:15004@mlx5_7, …): local protection error
		t.Event = "slice_failed"
		body, status, ok := strings.Cut(msg[sliceFailure(msg):], "): ")
		if ok {
			t.Reason = status
		} else {
			t.Reason = "unknown status"
		}
		if nic, ok := tokenAfter(body, "local_nic: ", ","); ok {
			t.NIC = nic
		}
		if peer, ok := tokenAfter(body, "peer_nic: ", ",)"); ok {
			// Peer is ip:port so it joins SGLang "Session ip:port failed.";
			// the remote device stays in Reason's context via the raw line.
			addr, dev, _ := strings.Cut(peer, "@")
			t.Peer = addr
			if t.NIC == "" {
				t.NIC = dev
			}
		}
		// Mooncake's first RDMA context printed no peer (§g); a line that
		// names one that cannot be read is malformed.
		if t.Peer == "" && strings.Contains(body, "peer_nic") {
			return transferOut(t, "peer_nic not found")
		}
	case strings.HasPrefix(msg, "Too many errors found in local RNIC "):
		t.Event = "rnic_inactive"
		t.NIC, _ = tokenAfter(msg, "local RNIC ", ", ")
		t.Reason = msg
	case strings.HasPrefix(msg, "Sync batch data transfer timeout"):
		t.Event = "sync_timeout"
		t.Reason = msg
	case strings.HasPrefix(msg, "Failed to complete transfers after "):
		t.Event = "transfers_incomplete"
		t.Reason = msg
	case strings.HasPrefix(msg, "Context is not active"):
		t.Event = "context_inactive"
		t.NIC = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(msg, "Context is not active"), ":"))
		t.Reason = msg
	case strings.HasPrefix(msg, "Device ") && strings.HasSuffix(msg, " is not active"):
		t.Event = "device_inactive"
		t.NIC = strings.TrimSuffix(strings.TrimPrefix(msg, "Device "), " is not active")
		t.Reason = msg
	case strings.HasPrefix(msg, "Failed to retrieve segment descriptor, name "):
		t.Event = "segment_lookup_failed"
		t.Peer = strings.TrimPrefix(msg, "Failed to retrieve segment descriptor, name ")
		t.Reason = msg
	default:
		return glogMore(msg, t)
	}
	return transferOut(t, "")
}

// glogMoreHeads are further Mooncake transfer-engine and store failures
// (checked against Mooncake v0.3.0–v0.3.12 and HEAD 3b5a5941; the file
// each comes from is noted).
var glogMoreHeads = [...]struct{ head, event string }{
	{"Transfer failed for task", "task_failed"},                                           // mooncake-store client.cpp / transfer_task.cpp
	{"Transfer incomplete, retrying", "transfer_retry"},                                   // mooncake-store client.cpp ≤ v0.3.2 (WARNING)
	{"Failed to submit all transfers, error code is ", "submit_failed"},                   // mooncake-store transfer_task.cpp
	{"Failed to submit transfer task to ", "submit_failed"},                               // transfer_engine multi_transport.cpp
	{"TcpTransport: ASIO exception: ", "tcp_exception"},                                   // tcp_transport.cpp
	{"TcpTransport::startTransfer encountered an ASIO exception", "tcp_exception"},        // tcp_transport.cpp (as logged in Mooncake #682, #1067)
	{"Session::writeBody failed", "tcp_write_failed"},                                     // tcp_transport.cpp
	{"ServerSession::writeBody failed", "tcp_write_failed"},                               // tcp_transport.cpp
	{"Failed to allocate slices for ", "alloc_failed"},                                    // mooncake-store client.cpp (put operation / key)
	{"Failed to allocate buffer for put_batch operation", "alloc_failed"},                 // mooncake-store
	{"Failed to mount segment", "mount_failed"},                                           // mooncake-store client / real_client.cpp
	{"Transfer failed for key: ", "store_transfer_failed"},                                // mooncake-store client_service.cpp
	{"Transfer failed, error code is ", "store_transfer_failed"},                          // mooncake-store client_service.cpp
	{"Handshake rejected by ", "handshake_rejected"},                                      // transfer_metadata.cpp
	{"Failed to connect to target: ", "connect_failed"},                                   // ascend_direct_transport.cpp
	{"Failed to connect to segment: ", "connect_failed"},                                  // ascend_direct_transport.cpp
	{"Transfer Engine does not support overlapped memory region", "register_failed"},      // transfer_engine.cpp
	{"Worker: Received context async event ", "context_async_event"},                      // rdma worker_pool.cpp (WARNING)
	{"SocketHandShakePlugin: connect()", "handshake_connect_failed"},                      // transfer_metadata_plugin.cpp
	{"Failed to open segment for endpoint=", "open_segment_failed"},                       // mooncake-store transfer_task.cpp
	{"Failed to submit transfer operation", "submit_failed"},                              // mooncake-store client.cpp
	{"Re-establish connection: ", "reconnect"},                                            // rdma_endpoint.cpp setupConnectionsByPassive (WARNING)
	{"Retiring endpoint instead of resetting it", "endpoint_retired"},                     // rdma_endpoint.cpp (WARNING)
	{"Endpoint already established with ", "tent_established"},                            // tent rdma/endpoint.cpp: the event by the line's end, below
	{"InternalError: Endpoint already connected to different peer", "handshake_rejected"}, // tent rdma_transport.cpp status, before #3188
	{"InternalError: Endpoint retired for reconnection from peer", "endpoint_retired"},    // tent rdma_transport.cpp status, since #3188
}

func glogMore(msg string, t *TransferEvent) Parsed {
	for _, h := range glogMoreHeads {
		if !strings.HasPrefix(msg, h.head) {
			continue
		}
		t.Event, t.Reason = h.event, msg
		switch h.event {
		case "handshake_rejected":
			t.Peer, _, _ = strings.Cut(afterKey(msg, h.head), ": ")
		case "connect_failed":
			t.Peer, _ = tokenAfter(msg, h.head, ", ")
		case "handshake_connect_failed":
			t.Peer, _, _ = strings.Cut(afterKey(msg, h.head), ": ")
		case "open_segment_failed":
			t.Peer = strings.Trim(afterKey(msg, h.head), "'")
		case "context_async_event":
			t.NIC = strings.TrimSpace(afterKey(msg, " for context "))
		case "submit_failed":
			if strings.HasPrefix(msg, "Failed to submit transfer task to ") {
				t.Peer, _ = tokenAfter(msg, h.head, " ")
			}
		case "reconnect", "endpoint_retired":
			// … EndPoint: local {server}@{nic}, peer {server}@{nic}[ (state)]
			if ep := afterKey(msg, "EndPoint: local "); ep != "" {
				local, peer, _ := strings.Cut(ep, ", peer ")
				_, t.NIC, _ = strings.Cut(local, "@")
				peer, _, _ = strings.Cut(peer, " ")
				t.Peer, _, _ = strings.Cut(peer, "@")
			}
		case "tent_established":
			// TENT: "… with {peer nic} of {peer server}, cannot accept new
			// connection (unidirectional lifecycle)" before Mooncake #3188,
			// "…, retiring it for the new connection (…)" since; "…
			// (duplicate bootstrap, reusing connection)" (INFO) is no failure.
			rest := afterKey(msg, " of ")
			switch {
			case strings.Contains(rest, "retiring it for the new connection"):
				t.Event = "endpoint_retired"
			case strings.Contains(rest, "cannot accept new connection"):
				t.Event = "handshake_rejected"
			default:
				return unknown("")
			}
			t.Peer, _, _ = strings.Cut(rest, ",")
		}
		return transferOut(t, "")
	}
	return unknown("")
}
