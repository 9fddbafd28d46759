package web

import (
	"time"

	"github.com/kvtrail/kvtrail/domain"
)

// Store is everything the UI and API read and write, as the small
// interfaces declared next to the handlers that use them. The ClickHouse
// adapter (internal/chstore.UIStore) implements it; web holds no SQL.
type Store interface {
	auditStore
	searchStore
	requestStore
	findingStore
	overviewStore
	caseStore
	AffectedReader
	chartStore
	exportStore
	versionLister
	sessionStore
}

// errNotFound is the "no such row"; like every error kind it is a
// domain.Error, and fail maps kinds to status codes through
// domain.HTTPStatus, the one mapping the CLI's exit codes share.
var errNotFound = domain.Errorf(domain.NotFound, "not found")

// invalid is an Invalid error whose message is safe to show the user.
func invalid(msg string) error { return domain.Errorf(domain.Invalid, "%s", msg) }

// The UI's vocabulary is domain's; these names keep the handlers and
// templates as they were.
type (
	U64            = domain.U64
	RequestRow     = domain.RequestRow
	SearchQuery    = domain.SearchQuery
	SearchPage     = domain.SearchPage
	Finding        = domain.FindingView
	FindingQuery   = domain.FindingQuery
	FindingPage    = domain.FindingPage
	FindingDetail  = domain.FindingDetail
	Source         = domain.SourceTenant
	FindingBucket  = domain.FindingBucket
	SourceRow      = domain.IngestSource
	Gap            = domain.NodeGap
	CaseBucket     = domain.CaseBucket
	PromptPoint    = domain.PromptPoint
	Timeline       = domain.Timeline
	TimelineEvent  = domain.TimelineEvent
	RawLine        = domain.EvidenceLine
	NodeLimits     = domain.NodeLimits
	ContextRow     = domain.ContextRow
	PoolPoint      = domain.PoolPoint
	span           = domain.LineSpan
	Case           = domain.Case
	CaseFilters    = domain.CaseFilters
	HoldInfo       = domain.HoldInfo
	AffectedRow    = domain.AffectedListRow
	AffectedKey    = domain.AffectedKey
	AnalyzerRun    = domain.CaseRun
	AuditEntry     = domain.AuditEntry
	AuditQuery     = domain.AuditQuery
	AuditPage      = domain.AuditPage
	Export         = domain.Export
	Manifest       = domain.ExportManifest
	ManifestFilter = domain.ExportFilter
	ManifestFile   = domain.ExportFile
)

func normalizeRoles(rows []AffectedRow) { domain.NormalizeRoles(rows) }

// searchSorts are the sorts the search accepts.
var searchSorts = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range domain.SearchSorts {
		m[s] = true
	}
	return m
}()

const poolWindow = domain.DecodePoolWindow

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
