package simulate

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// lineWriter is one buffered output file. Timestamps are rendered from
// simulated nanoseconds (plus the node's clock skew) with a per-second cache,
// because formatting dominates generation time.
type lineWriter struct {
	rel   string
	f     *os.File
	w     *bufio.Writer
	buf   []byte
	lines int64
	bytes int64
	skew  int64 // ns added to true time: this node's clock error
	base  int64 // unix ns of simulated time 0

	cacheSec int64
	cache    []byte // "2006-01-02 15:04:05"
}

const writeBuf = 256 << 10

func newLineWriter(dir, rel string, base, skew int64) (*lineWriter, error) {
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("create dir for %s: %w", rel, err)
	}
	f, err := os.Create(p)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", rel, err)
	}
	return &lineWriter{rel: rel, f: f, w: bufio.NewWriterSize(f, writeBuf), base: base, skew: skew, cacheSec: -1}, nil
}

// unixNano converts simulated time to this file's clock.
func (lw *lineWriter) unixNano(t int64) int64 { return lw.base + t + lw.skew }

// appendPyTime appends "2006-01-02 15:04:05" (Python logging asctime) and,
// if ms, ".000" (SGLANG_LOG_MS).
func (lw *lineWriter) appendPyTime(b []byte, t int64, ms bool) []byte {
	u := lw.unixNano(t)
	sec := u / 1e9
	if sec != lw.cacheSec {
		lw.cacheSec = sec
		lw.cache = time.Unix(sec, 0).UTC().AppendFormat(lw.cache[:0], "2006-01-02 15:04:05")
	}
	b = append(b, lw.cache...)
	if ms {
		m := (u % 1e9) / 1e6
		b = append(b, '.', byte('0'+m/100), byte('0'+m/10%10), byte('0'+m%10))
	}
	return b
}

// appendRFC3339 appends RFC3339 with nanoseconds in UTC (gateway, page events).
func (lw *lineWriter) appendRFC3339(b []byte, t int64) []byte {
	return time.Unix(0, lw.unixNano(t)).UTC().AppendFormat(b, time.RFC3339Nano)
}

func (lw *lineWriter) writeLine(b []byte) {
	lw.w.Write(b)
	lw.w.WriteByte('\n')
	lw.lines++
	lw.bytes += int64(len(b)) + 1
}

func (lw *lineWriter) close() error {
	if err := lw.w.Flush(); err != nil {
		lw.f.Close()
		return fmt.Errorf("flush %s: %w", lw.rel, err)
	}
	if err := lw.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", lw.rel, err)
	}
	return nil
}

func appendFloat(b []byte, f float64, prec int) []byte {
	return strconv.AppendFloat(b, f, 'f', prec, 64)
}
