package web

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// An evidence line stored as ingest writes it since migration 0013 (its
// source by reference, source and file_digest left empty) and one stored
// before (its own strings) both show their file and digest, in the API and
// on the evidence page.
func TestEvidenceNamesFileOfBothRowShapes(t *testing.T) {
	st := testdb.New(t)
	seed(t, st, 3)
	now := time.Now().UTC().Truncate(time.Second)
	ts := seedStart.Add(31 * time.Minute)
	const path, digest = "/logs/decode-0.new.log", "sha256-of-new-stream-head"
	ref := ingest.SourceRef("decode-0", path, digest)
	newLine := seedLine + 20
	mustExec(t, st, `INSERT INTO line_sources (source_ref, node, source, file_digest, first_seen, version)`,
		[]any{ref, "decode-0", path, digest, now, uint32(1)})
	mustExec(t, st, `INSERT INTO raw_lines (ts, ts_ns, node, role, log_format, source_ref, byte_offset, line_no, line_id, kind,
 parse_status, parse_error, rid, bootstrap_room, line, ingested_at)`,
		[]any{ts, uint64(ts.UnixNano()), "decode-0", "decode", "sglang", ref, uint64(7), uint64(2), newLine, "request", "parsed", "", "",
			uint64(0), "Receive new-shape", now})
	u := newTestUI(t, st)
	for _, c := range []struct {
		id             uint64
		source, digest string
	}{{seedLine + 1, "decode-0.log", "digest"}, {newLine, path, digest}} {
		for _, at := range []string{"", fmt.Sprintf("?at=%d", ts.Unix())} {
			code, body := u.api(t, "viewer", "GET", fmt.Sprintf("/api/v1/evidence/%d%s", c.id, at), nil)
			if code != 200 {
				t.Fatalf("evidence %d%s: %d %s", c.id, at, code, body)
			}
			var got struct {
				Source     string `json:"source"`
				FileDigest string `json:"file_digest"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Source != c.source || got.FileDigest != c.digest {
				t.Errorf("evidence %d%s: source %q, digest %q; want %q, %q", c.id, at, got.Source, got.FileDigest, c.source, c.digest)
			}
		}
	}
}
