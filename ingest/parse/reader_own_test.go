package parse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestReaderRecordsOwnTheirBytes: parsers keep strings that share a
// record's Raw (see Parser), so records must not share memory with the
// reader's buffers or with each other, even when carved from one block.
func TestReaderRecordsOwnTheirBytes(t *testing.T) {
	var in bytes.Buffer
	for i := range 5000 {
		switch {
		case i%997 == 0:
			fmt.Fprintf(&in, "%s\n", strings.Repeat("long line ", 900)) // beyond a block share
		case i%101 == 0:
			fmt.Fprintf(&in, "Traceback (most recent call last):\n  File \"x.py\", line %d\nValueError: %d\n", i, i)
		default:
			fmt.Fprintf(&in, "[2026-08-20 10:00:00 TP%d] line %d\n", i%8, i)
		}
	}
	data := in.Bytes()
	recs := readAll(t, data, ReaderOptions{})
	want := make([]string, len(recs))
	for i, r := range recs {
		want[i] = string(r.Raw)
	}
	checkTiling(t, data, recs)
	// Writing into one record's spare capacity must not reach another.
	for i := range recs {
		recs[i].Raw = append(recs[i].Raw, "XXXXXXXX"...)
	}
	for i, r := range recs {
		if got := string(r.Raw[:len(r.Raw)-8]); got != want[i] {
			t.Fatalf("record %d changed: %q, want %q", i, got, want[i])
		}
	}
}
