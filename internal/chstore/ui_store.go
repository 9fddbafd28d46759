package chstore

import (
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// UIStore is the UI's and the API's store: the reads behind every page
// (requests, findings, cases, the overview, charts) and the writes the UI
// makes (cases, exports, the audit log, session revocations). It embeds the
// Store, so methods that other consumers hang on *Store stay reachable.
type UIStore struct {
	*Store
	// GapThreshold is the completeness rule's threshold for the overview's
	// gaps (the analyzers' configured value); 0 shows no gaps.
	GapThreshold time.Duration
}

// NewUIStore wraps s for the UI, with the gap threshold the analyzers use.
func NewUIStore(s *Store, gapThreshold time.Duration) UIStore {
	return UIStore{Store: s, GapThreshold: gapThreshold}
}

// uiNotFound is the UI store's "no such row"; like every error kind it is a
// domain.Error, mapped to a status code by domain.HTTPStatus.
var uiNotFound = domain.Errorf(domain.NotFound, "not found")

// uiInvalid is an Invalid error whose message is safe to show the user.
func uiInvalid(msg string) error { return domain.Errorf(domain.Invalid, "%s", msg) }

func uiToU64s(v []uint64) []domain.U64 {
	out := make([]domain.U64, len(v))
	for i, x := range v {
		out[i] = domain.U64(x)
	}
	return out
}

// uiUTC is a time as the DateTime columns store it: UTC, whole seconds.
func uiUTC(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// uiPlaceholders is "?, ?, ..." (n of them).
func uiPlaceholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
