package parse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DefaultMaxRecordBytes caps the bytes kept per record. A server_args line
// is tens of KB and a level-3 Finish line can be MBs (§d); beyond the cap
// the record is kept truncated rather than growing memory without bound.
const DefaultMaxRecordBytes = 1 << 20

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// MaxRecordBytes caps Record.Raw; 0 means DefaultMaxRecordBytes.
	MaxRecordBytes int
	// SingleLine disables traceback joining: every physical line is one
	// record. Use it for JSON-lines and Prometheus sources.
	SingleLine bool
}

// Record is one log record: usually one line, or a line plus the traceback
// lines that follow it.
//
// Offset and Length cover the record's bytes in the stream exactly,
// terminators included, so consecutive records tile the input. Raw is a
// prefix of those bytes without the final line terminator; it equals them
// unless Truncated. Invalid UTF-8 is kept as is.
type Record struct {
	Offset    int64
	Length    int64
	LineNo    int64 // 1-based line number of the first line
	Lines     int   // physical lines in the record
	Raw       []byte
	Truncated bool
}

// Reader splits a byte stream into Records with bounded memory.
type Reader struct {
	br       *bufio.Reader
	max      int
	single   bool
	off      int64 // offset of the next unread byte
	lineNo   int64
	pending  *Record
	pendTerm []byte // terminator of the pending record's last line
	inTB     bool   // the pending record is inside a Python traceback
	tbExc    bool   // ... and has reached the traceback's exception line
	inArgs   bool   // the pending record is a server_args dump wrapped over lines
	inJSON   bool   // the pending record is a pretty-printed JSON body
	err      error
	line     []byte // scratch for the current physical line
	block    []byte // see own
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader, opts ReaderOptions) *Reader {
	max := opts.MaxRecordBytes
	if max <= 0 {
		max = DefaultMaxRecordBytes
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: max, single: opts.SingleLine}
}

// Offset is the stream offset just past the last record returned, which is
// where a resumed read of the same source starts.
func (r *Reader) Offset() int64 {
	if r.pending != nil {
		return r.pending.Offset
	}
	return r.off
}

// Next returns the next record, or io.EOF after the last one. Other errors
// come from the underlying reader.
func (r *Reader) Next() (Record, error) {
	for {
		if r.err != nil {
			if r.pending != nil {
				rec := *r.pending
				r.pending = nil
				return rec, nil
			}
			return Record{}, r.err
		}
		start := r.off
		content, total, term, trunc, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				r.err = io.EOF
			} else {
				r.err = fmt.Errorf("parse.Reader: read at offset %d: %w", r.off, err)
			}
			if total == 0 {
				continue
			}
		}
		r.off += total
		r.lineNo++
		if r.pending != nil && !r.single && r.isContinuation(content) {
			p := r.pending
			p.Length += total
			p.Lines++
			if !p.Truncated {
				room := r.max - len(p.Raw)
				add := len(r.pendTerm) + len(content)
				if add <= room && !trunc {
					p.Raw = append(p.Raw, r.pendTerm...)
					p.Raw = append(p.Raw, content...)
				} else {
					// Keep Raw a true prefix of the record bytes.
					p.Raw = append(p.Raw, clip(append(r.pendTerm[:len(r.pendTerm):len(r.pendTerm)], content...), room)...)
					p.Truncated = true
				}
			}
			r.pendTerm = term
			switch {
			case bytes.HasPrefix(content, tracebackHead):
				r.inTB, r.tbExc = true, false
			case r.inTB && len(content) > 0 && content[0] != ' ' && content[0] != '\t':
				// The frames are indented; the first line that is not
				// is the exception ("RuntimeError: …"), or a chained
				// exception's heading.
				r.tbExc = true
			}
			if r.inArgs && bytes.HasSuffix(bytes.TrimRight(content, " \r"), []byte(")")) {
				r.inArgs = false
			}
			if r.inJSON && len(content) > 0 && (content[0] == '}' || content[0] == ']') {
				r.inJSON = false
			}
			continue
		}
		rec := &Record{Offset: start, Length: total, LineNo: r.lineNo, Lines: 1,
			Raw: r.own(content), Truncated: trunc}
		prev := r.pending
		r.pending, r.pendTerm = rec, term
		trimmed := bytes.TrimRight(content, " \r")
		// "Scheduler hit an exception: Traceback (most recent call last):"
		r.inTB = bytes.HasPrefix(content, tracebackHead) || bytes.HasSuffix(trimmed, tracebackHead)
		r.tbExc = false
		r.inArgs = bytes.Contains(content, serverArgsHead) && !bytes.HasSuffix(trimmed, []byte(")")) && !trunc
		r.inJSON = len(trimmed) > 0 && (trimmed[len(trimmed)-1] == '{' || trimmed[len(trimmed)-1] == '[') &&
			(trimmed[0] == '{' || trimmed[0] == '[')
		if prev != nil {
			return *prev, nil
		}
	}
}

// own returns a copy of a line for a new record. Short lines are carved
// from a shared block instead of allocated one by one (most records are
// one short line); each copy's capacity ends at its length, so appending
// a continuation line reallocates instead of reaching the next record.
// The copies are never written again (Parser relies on it).
func (r *Reader) own(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > rawBlock/8 {
		return append([]byte(nil), b...)
	}
	if len(r.block) < len(b) {
		r.block = make([]byte, rawBlock)
	}
	out := r.block[:len(b):len(b)]
	copy(out, b)
	r.block = r.block[len(b):]
	return out
}

// rawBlock is the size of the blocks own carves records from: a block
// stays in memory while any record of it does, which for ingest is one
// batch.
const rawBlock = 32 << 10

func clip(b []byte, n int) []byte {
	if n < 0 {
		n = 0
	}
	if len(b) > n {
		return b[:n]
	}
	return b
}

var (
	tracebackHead  = []byte("Traceback (most recent call last):")
	serverArgsHead = []byte("server_args=ServerArgs(")
)

// isContinuation implements the multi-line rules (package doc of Reader):
// a "Traceback (most recent call last):" line, a line starting with
// whitespace, or — inside a traceback or a wrapped server_args dump — any
// line that does not start with a recognised record prefix belongs to the
// previous record; so does the closing bracket of a pretty-printed JSON body.
func (r *Reader) isContinuation(line []byte) bool {
	if bytes.HasPrefix(line, tracebackHead) {
		return true
	}
	if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
		return true
	}
	if r.inJSON && len(line) > 0 && (line[0] == '}' || line[0] == ']') {
		return true
	}
	if r.inTB && r.tbExc && knownMessage(line) {
		// Past the exception, a line kvtrail reads on its own is the next
		// record, not more of the error: logs copied without their
		// timestamps (kubectl excerpts, pasted reports) have no prefix to
		// end the traceback, and "Prefill transfer failed for request …"
		// right after one was lost inside it.
		return false
	}
	return (r.inTB || r.inArgs) && !hasRecordPrefix(line)
}

// knownMessage reports whether a line without a record prefix reads as an
// SGLang or Mooncake message (what Classifier.bare would parse). Only the
// lines after a traceback's exception are asked, so its cost does not
// matter.
func knownMessage(line []byte) bool {
	if len(line) == 0 || hasRecordPrefix(line) {
		return false
	}
	s := string(line)
	if (&SGLangParser{}).ParseLine(s).Status == StatusParsed {
		return true
	}
	return glogMessage(strings.TrimSpace(s)).Status == StatusParsed
}

// hasRecordPrefix reports whether line starts like a record of one of the
// supported formats.
func hasRecordPrefix(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	switch c := line[0]; {
	case c == '[' || c == '{' || c == '#':
		return true
	case c >= '0' && c <= '9':
		return len(line) >= 5 && isDigits(line[:4]) && line[4] == '-'
	case c == 'I' || c == 'W' || c == 'E' || c == 'F':
		if len(line) >= 5 && isDigits(line[1:5]) {
			return true
		}
		return bytes.HasPrefix(line, []byte("INFO:")) || bytes.HasPrefix(line, []byte("WARNING:")) || bytes.HasPrefix(line, []byte("ERROR:"))
	}
	return false
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// readLine reads one physical line. content excludes the terminator and is
// at most r.max bytes (trunc set when more were dropped); total counts every
// byte consumed; term is "\n", "\r\n" or "" at EOF.
//
// content is only valid until the next read: a line that fits the buffer
// is returned in place, without a copy to the scratch line.
func (r *Reader) readLine() (content []byte, total int64, term []byte, trunc bool, err error) {
	r.line = r.line[:0]
	var last2 [2]byte // last two bytes seen, for CRLF detection past the cap
	var line []byte
	for first := true; ; first = false {
		chunk, e := r.br.ReadSlice('\n')
		total += int64(len(chunk))
		switch n := len(chunk); {
		case n >= 2:
			last2 = [2]byte{chunk[n-2], chunk[n-1]}
		case n == 1:
			last2 = [2]byte{last2[1], chunk[0]}
		}
		if first && e != bufio.ErrBufferFull {
			line = chunk // the whole line in one piece (the common case)
			err = e
			break
		}
		if room := r.max + 2 - len(r.line); room > 0 {
			r.line = append(r.line, clip(chunk, room)...)
		}
		line = r.line
		if e == bufio.ErrBufferFull {
			continue
		}
		err = e
		break
	}
	n := total // content length
	switch {
	case total >= 2 && last2 == [2]byte{'\r', '\n'}:
		term, n = crlf, total-2
	case total >= 1 && last2[1] == '\n':
		term, n = lf, total-1
	}
	if n > int64(r.max) {
		return line[:r.max], total, term, true, err
	}
	return line[:n], total, term, false, err
}

var (
	crlf = []byte("\r\n")
	lf   = []byte("\n")
)
