package push

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// sizes records what a request cost, for metrics.
type sizes struct {
	compressed   int64 // bytes read from the wire
	decompressed int64 // bytes after Content-Encoding (and snappy, if any)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// reservingReader reserves every byte it returns in the request's share of
// the in-flight budget, failing with ErrUnavailable past the bound.
type reservingReader struct {
	r   io.Reader
	res *reservation
}

func (rr *reservingReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if gerr := rr.res.grow(int64(n)); gerr != nil {
		return 0, gerr
	}
	return n, err
}

// readBody reads the whole body, undoing Content-Encoding, and enforces
// both size limits. Reading one byte past each limit (LimitReader(max+1))
// is how an oversized body is told apart from one exactly at the limit.
func readBody(r *http.Request, lim Limits) ([]byte, sizes, error) {
	var sz sizes
	if r.ContentLength > lim.MaxCompressedBytes {
		return nil, sz, fmt.Errorf("%w: body is %d bytes, limit is %d", ErrTooLarge, r.ContentLength, lim.MaxCompressedBytes)
	}
	if r.Body == nil {
		return nil, sz, nil
	}
	wire := &countingReader{r: io.LimitReader(r.Body, lim.MaxCompressedBytes+1)}
	dec, err := decoder(r.Header.Get("Content-Encoding"), wire)
	if err != nil {
		sz.compressed = wire.n
		return nil, sz, err
	}
	data, err := io.ReadAll(&reservingReader{r: io.LimitReader(dec, lim.MaxDecompressedBytes+1), res: lim.res})
	sz.compressed, sz.decompressed = wire.n, int64(len(data))
	if errors.Is(err, ErrUnavailable) {
		return nil, sz, err
	}
	// The compressed check comes first: a body cut off at the limit also
	// makes the decompressor fail, and "too large" is the real cause.
	if wire.n > lim.MaxCompressedBytes {
		return nil, sz, fmt.Errorf("%w: body exceeds %d bytes", ErrTooLarge, lim.MaxCompressedBytes)
	}
	if err != nil {
		return nil, sz, fmt.Errorf("%w: reading body: %v", ErrBadRequest, err)
	}
	if int64(len(data)) > lim.MaxDecompressedBytes {
		return nil, sz, fmt.Errorf("%w: decompressed body exceeds %d bytes", ErrTooLarge, lim.MaxDecompressedBytes)
	}
	return data, sz, nil
}

// decoder wraps src according to a Content-Encoding header value. Errors
// from the compression libraries name offsets and formats, never content.
func decoder(encoding string, src io.Reader) (io.Reader, error) {
	switch enc := strings.ToLower(strings.TrimSpace(encoding)); enc {
	case "", "identity":
		return src, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, badEncoding("gzip", err)
		}
		return zr, nil
	case "deflate":
		// RFC 9110 says "deflate" is zlib-wrapped, but many clients (and
		// Loki itself) use raw DEFLATE. A zlib header is recognisable: CM=8
		// in the low nibble and the two header bytes a multiple of 31.
		br := bufio.NewReader(src)
		if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, badEncoding("deflate", err)
			}
			return zr, nil
		}
		return flate.NewReader(br), nil
	default:
		return nil, fmt.Errorf("%w: Content-Encoding %s (want gzip, deflate or none)", ErrUnsupportedMediaType, quoteHeader(enc))
	}
}

func badEncoding(name string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: malformed %s body: %v", ErrBadRequest, name, err)
}

// quoteHeader quotes a header value for an error message, cut short so a
// hostile header cannot bloat logs.
func quoteHeader(v string) string {
	const max = 40
	if len(v) > max {
		v = v[:max] + "…"
	}
	return fmt.Sprintf("%q", v)
}
