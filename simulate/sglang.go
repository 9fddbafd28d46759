package simulate

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SGLang text-log writers. Every format string here follows
// /work/shared/reference/sglang-log-formats.md (section noted per method).

// begin starts a line: "[asctime(.ms)(rank prefix)] ". rank < 0 means a
// tokenizer/HTTP-process line, which has no rank prefix (§0).
func (n *node) begin(t int64, rank int) []byte {
	b := append(n.log.buf[:0], '[')
	b = n.log.appendPyTime(b, t, n.logMS)
	if rank >= 0 {
		b = append(b, n.rankPrefix(rank)...)
	}
	return append(b, "] "...)
}

func (n *node) emit(b []byte) { n.log.buf = b; n.log.writeLine(b) }

func (n *node) linef(t int64, rank int, format string, args ...any) {
	b := n.begin(t, rank)
	b = fmt.Appendf(b, format, args...)
	n.emit(b)
}

const sec = int64(time.Second)

// startup writes the boot block (§a1–a5) and returns when the node is ready.
func (n *node) startup(t int64) int64 {
	b := n.cur()
	mode := "'prefill'"
	switch n.role {
	case roleDecode:
		mode = "'decode'"
	case roleUnified:
		mode = "'null'"
	}
	tp := n.dp
	dpAttn := "True"
	if n.dp == 1 {
		dpAttn = "False"
	}
	fmtArgs := ""
	if n.version >= v0511 {
		f := "text"
		if n.jsonReq {
			f = "json"
		}
		fmtArgs = fmt.Sprintf(", log_requests_format='%s', log_requests_target=None", f)
	}
	n.linef(t, -1, "server_args=ServerArgs(model_path='%s', tokenizer_path='%s', tokenizer_mode='auto', skip_tokenizer_init=False, load_format='auto', trust_remote_code=True, dtype='auto', quantization='%s', context_length=None, device='cuda', served_model_name='glm-5.2', host='%s', port=30000, mem_fraction_static=%v, max_running_requests=None, max_total_tokens=None, chunked_prefill_size=8192, max_prefill_tokens=16384, schedule_policy='fcfs', page_size=%d, tp_size=%d, pp_size=1, dp_size=%d, ep_size=%d, enable_dp_attention=%s, load_balance_method='follow_bootstrap_room', allow_auto_truncate=False, log_level='info', log_requests=True, log_requests_level=%d%s, enable_metrics=True, disaggregation_mode=%s, disaggregation_transfer_backend='mooncake', disaggregation_bootstrap_port=8998, disaggregation_ib_device='mlx5_0')",
		b.model, b.model, b.quant, n.host, b.memFrac, n.pageSize, tp, n.dp, n.dp, dpAttn, n.reqLevel, fmtArgs, mode)
	n.linef(t+sec, -1, "Using default HuggingFace chat template with detected content format: string")
	for r := 0; r < n.dp; r++ {
		n.linef(t+2*sec-sec/10, r, "Init torch distributed begin.")
	}
	// torch.distributed's Gloo groups report on stderr, without a prefix.
	for r := 0; r < min(n.dp, 4); r++ {
		n.log.writeLine(fmt.Appendf(n.log.buf[:0], "[Gloo] Rank %d is connected to %d peer ranks. Expected number of connected peer ranks is : %d", r, n.dp-1, n.dp-1))
	}
	for r := 0; r < n.dp; r++ {
		if n.version == v052 {
			n.linef(t+2*sec, r, "Init torch distributed ends. mem usage=0.00 GB")
		} else {
			n.linef(t+2*sec, r, "Init torch distributed ends. elapsed=2.%02d s, mem usage=0.00 GB", 10+r)
		}
	}
	// Memory figures follow from one GPU size, so none of them can go
	// negative: mem_fraction_static of the GPU holds weights and KV pool.
	weights := 46.72
	if b.quant == "w4afp8" {
		weights = 31.05
	}
	kvGB := float64(b.pool) * kvBytesPerToken / (1 << 30) / float64(max(1, n.dp))
	gpuGB := (weights + kvGB) / b.memFrac
	before := gpuGB * 0.985 // what CUDA context and NCCL leave
	n.linef(t+4*sec, 0, "Load weight begin. avail mem=%.2f GB", before)
	n.linef(t+4*sec, 0, "Using model weights format ['*.safetensors']")
	const shards = 4
	for i := 0; i <= shards; i++ {
		n.log.writeLine(fmt.Appendf(n.log.buf[:0], "Loading safetensors checkpoint shards: %3d%% Completed | %d/%d [00:%02d<00:%02d, %5.2fit/s]",
			100*i/shards, i, shards, 9*i, 9*(shards-i), 0.11))
	}
	if n.version == v052 {
		n.linef(t+40*sec, 0, "Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB.", before-weights, weights)
	} else {
		n.linef(t+40*sec, 0, "Load weight end. elapsed=36.%02d s, type=GlmMoeDsaForCausalLM, quant=%s, avail mem=%.2f GB, mem usage=%.2f GB.", n.idx, b.quant, before-weights, weights)
	}
	n.linef(t+41*sec, 0, "Using KV cache dtype: torch.float8_e4m3fn")
	if n.version == v0518 {
		n.linef(t+42*sec, 0, "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: %d, KV size: %.2f GB", b.pool, kvGB)
	} else {
		n.linef(t+42*sec, 0, "KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB", b.pool, kvGB/2, kvGB/2)
	}
	avail := before - weights - kvGB
	n.linef(t+42*sec, 0, "Memory pool end. avail mem=%.2f GB", avail)
	if n.mc != nil && n.mc == n.log {
		n.writeMooncakeStartup(t + 42*sec + sec/2) // the KV manager creates the transfer engine
	}
	graph := 0.0
	if n.role != rolePrefill {
		n.linef(t+43*sec, 0, "Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB", avail)
		bs := []int{1, 2, 4, 8, 16, 32}
		for i, x := range bs {
			graph = 0.05 * float64(i+1)
			n.log.writeLine(fmt.Appendf(n.log.buf[:0], "Capturing batches (bs=%d avail_mem=%.2f GB): %3d%%|%s| %d/%d [00:%02d<00:00,  %.2fit/s]",
				x, avail-graph, 100*(i+1)/len(bs), progressBar(i+1, len(bs)), i+1, len(bs), i+1, 4.1))
		}
		n.linef(t+50*sec, 0, "Capture cuda graph end. Time elapsed: 6.%02d s. mem usage=%.2f GB. avail mem=%.2f GB.", n.idx%100, graph, avail-graph)
	}
	n.linef(t+51*sec, 0, "max_total_num_tokens=%d, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=%d, context_len=%d, available_gpu_mem=%.2f GB",
		b.pool, 4096, contextLen, avail-graph)
	n.linef(t+52*sec, -1, "INFO:     Started server process [%d]", 2600+n.idx)
	n.linef(t+52*sec, -1, "INFO:     Waiting for application startup.")
	n.linef(t+52*sec, -1, "INFO:     Application startup complete.")
	n.linef(t+52*sec, -1, "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")
	n.linef(t+90*sec, -1, "The server is fired up and ready to roll!")
	return t + 90*sec
}

// progressBar is tqdm's bar body for i of n steps, 10 cells wide.
func progressBar(i, n int) string {
	full := 10 * i / n
	return strings.Repeat("█", full) + strings.Repeat(" ", 10-full)
}

// prefillBatch writes the scheduler's prefill line in the node's version (§b1, §b4).
func (n *node) prefillBatch(t int64, rank, newTok, cached int, usage float64, running, queue, pending, bootstrap, inflight int, tput float64) {
	b := n.begin(t, rank)
	pd := n.role == rolePrefill
	switch n.version {
	case v052:
		b = append(b, "Prefill batch. #new-seq: 1, #new-token: "...)
		b = strconv.AppendInt(b, int64(newTok), 10)
		b = append(b, ", #cached-token: "...)
		b = strconv.AppendInt(b, int64(cached), 10)
		b = append(b, ", token usage: "...)
		b = appendFloat(b, usage, 2)
		if pd {
			b = fmt.Appendf(b, ", #unbootstrapped-req: %d, #queue-req: %d, #transferring-req: %d, input throughput (token/s): %.2f, ", bootstrap, queue, inflight, tput)
		} else {
			b = fmt.Appendf(b, ", #running-req: %d, #queue-req: %d, input throughput (token/s): %.2f, ", running, queue, tput)
		}
	default:
		b = append(b, "Prefill batch, #new-seq: 1, #new-token: "...)
		b = strconv.AppendInt(b, int64(newTok), 10)
		b = append(b, ", #cached-token: "...)
		b = strconv.AppendInt(b, int64(cached), 10)
		b = append(b, ", token usage: "...)
		b = appendFloat(b, usage, 2)
		b = fmt.Appendf(b, ", #running-req: %d, #queue-req: %d, #pending-token: %d, ", running, queue, pending)
		if pd && n.version == v0511 {
			b = fmt.Appendf(b, "#prealloc-req: %d, #inflight-req: %d, ", bootstrap, inflight)
		} else if pd {
			b = fmt.Appendf(b, "#bootstrap-req: %d, #inflight-req: %d, #optimistic-req: 0, ", bootstrap, inflight)
		}
		b = append(b, "cuda graph: False, input throughput (token/s): "...)
		b = appendFloat(b, tput, 2)
	}
	n.emit(b)
}

// decodeBatch writes the decode line (§b2, §b4).
func (n *node) decodeBatch(t int64, rank, running, tokens int, usage, preUsage float64, prealloc, transfer, retracted int, gen float64) {
	b := n.begin(t, rank)
	sep := ", "
	if n.version == v052 {
		b = append(b, "Decode batch. #running-req: "...)
	} else {
		b = append(b, "Decode batch, #running-req: "...)
	}
	b = strconv.AppendInt(b, int64(running), 10)
	b = append(b, ", #token: "...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, ", token usage: "...)
	b = appendFloat(b, usage, 2)
	b = append(b, sep...)
	if n.role == roleDecode {
		b = append(b, "pre-allocated usage: "...)
		b = appendFloat(b, preUsage, 2)
		if n.version != v052 {
			b = fmt.Appendf(b, ", #prealloc-req: %d, #transfer-req: %d", prealloc, transfer)
		}
		b = fmt.Appendf(b, ", #retracted-req: %d, ", retracted)
	}
	b = append(b, "cuda graph: True, gen throughput (token/s): "...)
	b = appendFloat(b, gen, 2)
	b = append(b, ", #queue-req: 0"...)
	if n.version == v052 {
		b = append(b, ", "...)
	}
	n.emit(b)
}

// reject is validate_input_length's message logged by set_finish_with_abort
// (§c1). Only tp_rank 0 logs it: with DP attention that is DP rank 0, so
// rejections on other DP ranks leave no error line.
func (n *node) reject(t int64, rank, inputLen, limit int, rid string) {
	if rank != 0 {
		return
	}
	b := n.begin(t, rank)
	b = fmt.Appendf(b, "Input length (%d tokens) exceeds the maximum allowed length (%d tokens). Use a shorter input or enable --allow-auto-truncate., self.rid='%s'", inputLen, limit, rid)
	n.emit(b)
}

// transferFailed writes the prefill.py / decode.py failure lines (§c4).
func (n *node) transferFailed(t int64, rank int, rid string, room uint64, reason string) {
	b := n.begin(t, rank)
	if n.role == roleDecode {
		b = fmt.Appendf(b, "Decode transfer failed for request rank=%d decode_req.req.rid='%s' decode_req.req.bootstrap_room=%d with exception KVTransferError(bootstrap_room=%d): %s", rank, rid, room, room, reason)
	} else {
		b = fmt.Appendf(b, "Prefill transfer failed for request rank=%d req.rid='%s' req.bootstrap_room=%d with exception KVTransferError(bootstrap_room=%d): %s", rank, rid, room, room, reason)
	}
	n.emit(b)
}

func (n *node) corruption(t int64, rank int, rid string, room, other uint64, idx int) {
	n.linef(t, rank, "Context corruption detected: Request %s (bootstrap_room=%d) received metadata from bootstrap_room=%d. Metadata buffer index: %d. This indicates metadata buffer index collision.", rid, room, other, idx)
}

func (n *node) waitingTimeoutHint(t int64, rank int) {
	if n.warned {
		return
	}
	n.warned = true
	n.linef(t, rank, "Some requests fail to receive KV Cache transfer done signal after bootstrapping. If a greater mean TTFT is acceptable, you can 'export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600' (10 minutes) to relax the timeout condition. ")
}

var statusText = map[int]string{200: "OK", 400: "Bad Request", 500: "Internal Server Error", 503: "Service Unavailable"}

// access is the uvicorn access line re-emitted through SGLang's formatter.
func (n *node) access(t int64, port int, status int) {
	b := n.begin(t, -1)
	b = fmt.Appendf(b, "INFO:     %s:%d - \"POST /generate HTTP/1.1\" %d %s", gatewayIP, port, status, statusText[status])
	n.emit(b)
}

// crashTraceback is what run_scheduler_process logs before the process dies.
func (n *node) crashTraceback(t int64) {
	lines := []string{
		"Scheduler hit an exception: Traceback (most recent call last):",
		`  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2731, in run_scheduler_process`,
		"    scheduler.event_loop_overlap_disagg_prefill()",
		`  File "/usr/local/lib/python3.12/dist-packages/torch/utils/_contextlib.py", line 116, in decorate_context`,
		"    return func(*args, **kwargs)",
		`  File "/sgl-workspace/sglang/python/sglang/srt/disaggregation/prefill.py", line 412, in event_loop_overlap_disagg_prefill`,
		"    self.process_disagg_prefill_inflight_queue()",
		`  File "/sgl-workspace/sglang/python/sglang/srt/disaggregation/prefill.py", line 598, in process_disagg_prefill_inflight_queue`,
		"    polls = poll_and_all_reduce([req.disagg_kv_sender for req in self.disagg_prefill_inflight_queue], self.tp_worker.get_tp_group().cpu_group)",
		"RuntimeError: CUDA error: an illegal memory access was encountered",
		"CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
		"",
	}
	b := n.begin(t, 1)
	b = append(b, lines[0]...)
	n.emit(b)
	for _, l := range lines[1:] {
		n.log.writeLine([]byte(l))
	}
	n.linef(t+sec/2, -1, "Received sigquit from a child process. It usually means the child failed.")
}

// garbageLines are written verbatim into one node's log: a truncated line,
// the kernel OOM-killer's shell message and a colored library warning.
// Ingest must keep them as unparsed evidence.
var garbageLines = []string{
	"[2026-07-0",
	"Killed",
	"\x1b[33mWARNING\x1b[0m  flashinfer: falling back to \x1b[1mtriton\x1b[0m backend for page_size=64",
	"\t",
}

func (n *node) garbage() {
	for _, g := range garbageLines {
		n.log.writeLine([]byte(g))
	}
}
