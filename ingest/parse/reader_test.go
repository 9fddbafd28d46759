package parse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(tb testing.TB, in []byte, opts ReaderOptions) []Record {
	tb.Helper()
	r := NewReader(bytes.NewReader(in), opts)
	var out []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatalf("Next: %v", err)
		}
		out = append(out, rec)
	}
}

// checkTiling asserts the reader invariants: records tile the input
// exactly, Raw is a prefix of the record's bytes and equals them minus the
// final terminator unless truncated, and line numbers add up.
func checkTiling(tb testing.TB, in []byte, recs []Record) {
	tb.Helper()
	var off, line int64 = 0, 1
	for i, r := range recs {
		if r.Offset != off || r.LineNo != line {
			tb.Fatalf("record %d at offset %d line %d, want %d line %d", i, r.Offset, r.LineNo, off, line)
		}
		if r.Length <= 0 || r.Offset+r.Length > int64(len(in)) {
			tb.Fatalf("record %d: bad length %d", i, r.Length)
		}
		span := in[r.Offset : r.Offset+r.Length]
		if !bytes.HasPrefix(span, r.Raw) {
			tb.Fatalf("record %d: raw is not a prefix of its bytes", i)
		}
		if !r.Truncated {
			want := bytes.TrimSuffix(span, []byte("\n"))
			if len(want) < len(span) {
				want = bytes.TrimSuffix(want, []byte("\r"))
			}
			if !bytes.Equal(r.Raw, want) {
				tb.Fatalf("record %d: raw %q, want %q", i, r.Raw, want)
			}
		}
		off += r.Length
		line += int64(r.Lines)
	}
	if off != int64(len(in)) {
		tb.Fatalf("records cover %d bytes of %d", off, len(in))
	}
}

func TestReader(t *testing.T) {
	tb := "[2026-01-01 00:00:00] Scheduler hit an exception: Traceback (most recent call last):\n" +
		"Traceback (most recent call last):\n" +
		"  File \"x.py\", line 1, in <module>\n" +
		"\n" +
		"During handling of the above exception, another exception occurred:\n" +
		"ValueError: boom\n" +
		"[2026-01-01 00:00:01] next\n"
	for _, c := range []struct {
		name  string
		in    string
		opts  ReaderOptions
		raws  []string
		trunc []bool
	}{
		{"lf", "a\nb\n", ReaderOptions{}, []string{"a", "b"}, nil},
		{"crlf and no final newline", "[2026-01-01 00:00:00] a\r\n[2026-01-01 00:00:00] b", ReaderOptions{}, []string{"[2026-01-01 00:00:00] a", "[2026-01-01 00:00:00] b"}, nil},
		{"traceback", tb, ReaderOptions{}, []string{tb[:strings.Index(tb, "ValueError: boom\n")+len("ValueError: boom")], "[2026-01-01 00:00:01] next"}, nil},
		{"single line", "x\n  y\n", ReaderOptions{SingleLine: true}, []string{"x", "  y"}, nil},
		{"indented continuation", "x\n  y\r\nz\n", ReaderOptions{}, []string{"x\n  y", "z"}, nil},
		{"long line truncated", strings.Repeat("a", 100) + "\nb\n", ReaderOptions{MaxRecordBytes: 10}, []string{strings.Repeat("a", 10), "b"}, []bool{true, false}},
		{"cap exactly with crlf", strings.Repeat("a", 10) + "\r\n", ReaderOptions{MaxRecordBytes: 10}, []string{strings.Repeat("a", 10)}, []bool{false}},
		{"continuation over cap", "abcdef\n  ghijkl\n", ReaderOptions{MaxRecordBytes: 10}, []string{"abcdef\n  g"}, []bool{true}},
		{"invalid utf8 kept", "\xff\xfe bad\n", ReaderOptions{}, []string{"\xff\xfe bad"}, nil},
		{"empty lines", "\n\nx\n", ReaderOptions{}, []string{"", "", "x"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := readAll(t, []byte(c.in), c.opts)
			checkTiling(t, []byte(c.in), recs)
			var raws []string
			for i, r := range recs {
				raws = append(raws, string(r.Raw))
				if c.trunc != nil {
					eq(t, "truncated", r.Truncated, c.trunc[i])
				}
			}
			eq(t, "raws", raws, c.raws)
		})
	}
}

func TestReaderBigLineBoundedMemory(t *testing.T) {
	// 8 MiB line with the default 1 MiB cap: kept bytes stay at the cap.
	in := append(bytes.Repeat([]byte("x"), 8<<20), "\nok\n"...)
	recs := readAll(t, in, ReaderOptions{})
	checkTiling(t, in, recs)
	eq(t, "records", len(recs), 2)
	eq(t, "kept", len(recs[0].Raw), DefaultMaxRecordBytes)
	eq(t, "truncated", recs[0].Truncated, true)
	eq(t, "length", recs[0].Length, int64(8<<20+1))
}

// Multi-line records of real streams stay one record: a traceback that
// starts at the end of a message and chains through "During handling…", a
// server_args dump wrapped over lines, a pretty-printed JSON body.
func TestReaderMultiLineRecords(t *testing.T) {
	in := []byte(`[2026-01-16 07:02:59 TP6] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl/scheduler.py", line 2712, in run_scheduler_process
RuntimeError: boom

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/sgl/x.py", line 1, in f
ValueError: second
[2026-01-16 07:03:00] server_args=ServerArgs(model_path='m', tp_si
ze=8, page_size=64, context_length=1048576,
disaggregation_mode='prefill')
{
  "text": "",
  "meta_info": {"id": "r1", "finish_reason": {"type": "abort", "message": "x", "status_code": 500}}
}
[2026-01-16 07:03:01] The server is fired up and ready to roll!
`)
	recs := readAll(t, in, ReaderOptions{})
	checkTiling(t, in, recs)
	lines := make([]int, len(recs))
	for i, r := range recs {
		lines[i] = r.Lines
	}
	eq(t, "record lines", lines, []int{9, 3, 4, 1})

	c, err := NewClassifier(FormatSGLang, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tb := c.Parse(recs[0])
	eq(t, "traceback", []string{string(tb.Kind), tb.Event, tb.Reason}, []string{"marker", "traceback", "ValueError: second"})
	args := c.Parse(recs[1])
	eq(t, "wrapped server_args", args.Status, StatusParsed)
	eq(t, "wrapped fields", []any{args.Boot.TPSize, args.Boot.PageSize, args.Boot.ContextLen, args.Boot.DisaggregationMode},
		[]any{uint16(8), uint32(64), uint64(1048576), "prefill"})
	body := c.Parse(recs[2])
	eq(t, "json body", []any{body.Event, body.RID, body.Engine.StatusCode, body.Engine.FinishType}, []any{"response_body", "r1", uint16(500), "abort"})
}

// A traceback ends at a line kvtrail reads on its own once the exception
// has been printed: logs copied without timestamps (sglang #38552, a
// kubectl excerpt) have no prefix to end it, and the rid-bearing transfer
// failure after it was read as part of the traceback. Lines that only
// continue the error (a CUDA message over several lines, a chained
// exception) stay in it.
func TestReaderTracebackEndsAtAKnownMessage(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		lines []int
	}{
		{"real excerpt without timestamps", `Unexpected transfer worker error for room 1788380104266545413
Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/disaggregation/nixl/conn.py", line 1153, in transfer_worker
    state_xfer_handles = self.maybe_send_extra(
RuntimeError: PD Disaggregation does NOT support PD different TP sizes for non-MLA SWA hybrid models yet.
Prefill transfer failed for request rank=0 req.rid='5b02aee35dae49aba98a333ce89964e6' with exception PD Disaggregation does NOT support PD different TP sizes for non-MLA SWA hybrid models yet.
INFO: 10.60.17.27:54838 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error
`, []int{5, 1, 1}},
		{"an exception message over several lines", `[2026-01-16 07:02:59 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl/scheduler.py", line 2712, in run_scheduler_process
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
[2026-01-16 07:03:00] next
`, []int{5, 1}},
		{"a chained exception", `Traceback (most recent call last):
  File "/sgl/x.py", line 1, in f
KeyError: 7

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/sgl/x.py", line 2, in g
RuntimeError: again
Decode transfer failed for request rank=0 decode_req.req.rid='a1' decode_req.req.bootstrap_room=5 with exception KVTransferError(bootstrap_room=5): Aborted by AbortReq.
`, []int{9, 1}},
		{"a known message inside the frames stays", `Traceback (most recent call last):
  File "/sgl/x.py", line 1, in f
Prefill transfer failed for request rank=0 req.rid='r' with exception x
ValueError: y
`, []int{4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			recs := readAll(t, in, ReaderOptions{})
			checkTiling(t, in, recs)
			lines := make([]int, len(recs))
			for i, r := range recs {
				lines[i] = r.Lines
			}
			eq(t, "record lines", lines, tc.lines)
		})
	}
}
