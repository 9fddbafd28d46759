package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/domain"
	"github.com/kvtrail/kvtrail/internal/testdb"
	"github.com/kvtrail/kvtrail/internal/workclaim"
)

// lateAcks is a claim store whose inserts are acknowledged late.
type lateAcks struct {
	workclaim.Store
	delay time.Duration
}

func (s lateAcks) InsertClaim(ctx context.Context, c domain.Claim) error {
	time.Sleep(s.delay)
	return s.Store.InsertClaim(ctx, c)
}

// A worker whose claims were withdrawn for late acknowledgements says so
// when it ends, with the count, the slowest acknowledgement and the flag
// that fixes it; one that withdrew none says nothing.
func TestWorkerWarnsOfWithdrawnClaims(t *testing.T) {
	ctx := context.Background()
	store := testdb.New(t)
	for _, tc := range []struct {
		delay time.Duration
		want  []string // in the log; none: no log at all
	}{
		{0, nil},
		{150 * time.Millisecond, []string{"claims withdrawn", "withdrawn=1", "slowest_ack=1", "claim_settle=200ms", "--claim-settle"}},
	} {
		settle := 200 * time.Millisecond
		co := &workclaim.Coordinator{Store: lateAcks{store, tc.delay}, Worker: "w", Lease: time.Hour, Settle: settle}
		if _, err := co.Claim(ctx, "job", tc.delay.String()); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		warnWithdrawn(slog.New(slog.NewTextHandler(&buf, nil)), co, settle)
		if tc.want == nil && buf.Len() > 0 {
			t.Errorf("acknowledged at once: logged %q", buf.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("acknowledged after %s: the warning %q lacks %q", tc.delay, buf.String(), w)
			}
		}
	}
}
