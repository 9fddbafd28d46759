package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	headerSize = 8
	// MaxRecordBytes bounds one record, so that a corrupted length field
	// cannot make recovery or Drain allocate gigabytes.
	MaxRecordBytes = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header returns the frame header of payload; the payload follows it.
func header(payload []byte) [headerSize]byte {
	var h [headerSize]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(h[0:4], castagnoli), castagnoli, payload)
	binary.LittleEndian.PutUint32(h[4:8], crc)
	return h
}

// frameError says why the bytes at some offset are not a valid record.
type frameError struct{ reason string }

func (e *frameError) Error() string { return e.reason }

var (
	errPartialHeader = &frameError{"partial record header"}
	errPartialRecord = &frameError{"partial record"}
	errBadLength     = &frameError{"record length out of range"}
	errChecksum      = &frameError{"checksum mismatch"}
)

// readRecord reads the record at the start of r, which holds avail bytes.
// It returns io.EOF when avail is 0, a *frameError when the bytes are not
// a valid record, or an I/O error.
func readRecord(r io.Reader, avail int64) ([]byte, error) {
	if avail == 0 {
		return nil, io.EOF
	}
	if avail < headerSize {
		return nil, errPartialHeader
	}
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("read record header: %w", err)
	}
	n := int64(binary.LittleEndian.Uint32(hdr[0:4]))
	if n > MaxRecordBytes {
		return nil, errBadLength
	}
	if n > avail-headerSize {
		return nil, errPartialRecord
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	crc := crc32.Update(crc32.Checksum(hdr[0:4], castagnoli), castagnoli, payload)
	if crc != binary.LittleEndian.Uint32(hdr[4:8]) {
		return nil, errChecksum
	}
	return payload, nil
}

func isFrameError(err error) bool {
	var fe *frameError
	return errors.As(err, &fe)
}
