package simulate

import (
	"fmt"
	"time"
)

// glog writes one Mooncake transfer-engine line (reference §g):
// "Lmmdd hh:mm:ss.uuuuuu THREADID file:line] msg", or with a 4-digit year
// for newer glog builds.
func (n *node) glog(t int64, level byte, thread int, file string, format string, args ...any) {
	tm := time.Unix(0, n.mc.unixNano(t)).UTC()
	b := append(n.mc.buf[:0], level)
	if n.glogYear {
		b = tm.AppendFormat(b, "20060102 15:04:05.000000")
	} else {
		b = tm.AppendFormat(b, "0102 15:04:05.000000")
	}
	b = fmt.Appendf(b, " %d %s] ", thread, file)
	b = fmt.Appendf(b, format, args...)
	n.mc.buf = b
	n.mc.writeLine(b)
}

// mooncakeStartup writes the transfer engine's startup lines to a separate
// Mooncake log (Config.MooncakeSeparate). In the default one-stream layout
// startup writes them itself, in time order among the SGLang lines.
func (n *node) mooncakeStartup(t int64) {
	if n.mc == nil || n.mc == n.log {
		return
	}
	n.writeMooncakeStartup(t)
}

// writeMooncakeStartup: the lines a transfer engine logs when SGLang's KV
// manager creates it (as in Mooncake #887, #10560 of sglang: preamble,
// host, handshake, topology, RDMA devices).
func (n *node) writeMooncakeStartup(t int64) {
	th := 3_900_000 + n.idx*1013
	n.mc.writeLine([]byte("WARNING: Logging before InitGoogleLogging() is written to STDERR"))
	n.glog(t, 'I', th, "transfer_engine.cpp:486", "Metrics reporting is disabled (set MC_TE_METRIC=1 to enable)")
	n.glog(t, 'I', th, "transfer_engine_impl.cpp:112", "Transfer Engine parseHostNameWithPort. server_name: %s port: 12001", n.host)
	n.glog(t+sec/10, 'I', th, "transfer_engine_impl.cpp:171", "Transfer Engine RPC using P2P handshake, listening on %s:15004", n.host)
	n.glog(t+sec/5, 'I', th, "transfer_engine_impl.cpp:214", "Auto-discovering topology...")
	n.glog(t+sec/2, 'I', th, "transfer_engine_impl.cpp:229", "Topology discovery complete. Found 8 HCAs.")
	for d := 0; d < 2; d++ {
		n.glog(t+sec/2+int64(d)*sec/50, 'I', th+1+d, "rdma_context.cpp:491", "Find best gid index: 0 on mlx5_%d/", d)
		n.glog(t+sec/2+int64(d)*sec/50+sec/100, 'I', th+1+d, "rdma_context.cpp:129",
			"RDMA device: mlx5_%d, LID: %d, GID: (GID_Index 0) fe:80:00:00:00:00:00:00:9c:63:c0:03:00:1a:%02x:%02x", d, 17+d, n.idx&0xff, d)
	}
}

// sliceFailed is the RDMA worker's per-slice failure (worker_pool.cpp).
func (n *node) sliceFailed(t int64, peer *node, retry int, status string) {
	th := 4_058_290 + n.idx*7
	nic := n.idx % 8
	n.glog(t, 'E', th, "worker_pool.cpp:654",
		"Worker: Process failed for slice (opcode: 1, source_addr: 0x7fd2%08x, length: 65536, dest_addr: 0x7fb9%08x, local_nic: mlx5_%d, peer_nic: %s:15004@mlx5_%d, dest_rkey: %d, retry_cnt: %d, max_retry_cnt: 8): %s",
		uint32(t>>12), uint32(t>>14), nic, peer.host, nic, 2136660+peer.idx, retry, status)
}
