package push

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
)

// Sink takes decoded entries. Accept must return nil only once the entries
// are durable (in ClickHouse or fsync'd to the local spool): the handler
// acknowledges the push with 204 on nil, and clients then forget the data.
// A Sink that is temporarily unable to take data wraps ErrUnavailable.
type Sink interface {
	Accept(ctx context.Context, entries []Entry) error
}

// Kinds of handler.
const (
	KindLoki   = "loki"   // POST /loki/api/v1/push
	KindNDJSON = "ndjson" // POST /ingest/v1/lines
)

// Metrics receives one observation per request. Implementations must be
// safe for concurrent use and should not block.
type Metrics interface {
	ObserveRequest(RequestStats)
}

// MetricsFunc adapts a function to Metrics.
type MetricsFunc func(RequestStats)

// ObserveRequest calls f(s).
func (f MetricsFunc) ObserveRequest(s RequestStats) { f(s) }

// RequestStats describes one handled request.
type RequestStats struct {
	Kind              string // KindLoki or KindNDJSON
	Status            int    // HTTP status sent
	Reason            string // "" when accepted, otherwise one of the Reason* constants
	Entries           int    // entries decoded (and, on 204, accepted)
	CompressedBytes   int64  // bytes read from the wire
	DecompressedBytes int64  // bytes after decompression
	Duration          time.Duration
}

// Rejection reasons, low-cardinality for use as a metric label.
const (
	ReasonTooLarge         = "too_large"
	ReasonBadRequest       = "bad_request"
	ReasonUnsupportedMedia = "unsupported_media_type"
	ReasonMethod           = "method_not_allowed"
	ReasonUnavailable      = "unavailable"
	ReasonSinkError        = "sink_error"
	ReasonPanic            = "panic"
)

// DefaultRetryAfter is sent with 503 answers.
const DefaultRetryAfter = 5 * time.Second

// Option configures Handler.
type Option func(*handler)

// WithMetrics sets the metrics hook.
func WithMetrics(m Metrics) Option { return func(h *handler) { h.metrics = m } }

// WithBudget bounds the decompressed bytes of all requests being handled
// at once (see Budget); nil means unbounded. Share one Budget between the
// handlers of a process.
func WithBudget(b *Budget) Option { return func(h *handler) { h.budget = b } }

// WithRetryAfter sets the Retry-After sent with 503 answers.
func WithRetryAfter(d time.Duration) Option { return func(h *handler) { h.retryAfter = d } }

type handler struct {
	kind       string
	lim        Limits
	sink       Sink
	log        *slog.Logger
	metrics    Metrics
	retryAfter time.Duration
	budget     *Budget
	decode     func(*http.Request, Limits) ([]Entry, sizes, error)
}

// Handler returns an http.Handler that decodes pushes of the given kind
// (KindLoki or KindNDJSON), passes them to sink, and answers 204 only after
// sink.Accept returned nil. Bad input gets 400/413/415, ErrUnavailable from
// the sink 503 with Retry-After, any other sink error or a panic 500.
// Handler panics on an unknown kind or a nil sink: those are wiring bugs
// that must fail at startup, not per request.
func Handler(kind string, lim Limits, sink Sink, logger *slog.Logger, opts ...Option) http.Handler {
	h := &handler{kind: kind, lim: lim.withDefaults(), sink: sink, log: logger, retryAfter: DefaultRetryAfter}
	switch kind {
	case KindLoki:
		h.decode = decodeLoki
	case KindNDJSON:
		h.decode = func(r *http.Request, l Limits) ([]Entry, sizes, error) { return decodeNDJSON(r, l, time.Now()) }
	default:
		panic(fmt.Sprintf("push.Handler: unknown kind %q", kind))
	}
	if sink == nil {
		panic("push.Handler: nil sink")
	}
	for _, o := range opts {
		o(h)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.metrics == nil {
		h.metrics = MetricsFunc(func(RequestStats) {})
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := RequestStats{Kind: h.kind}
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			// Log the panic's type and stack, not its value: a value may
			// hold request content.
			h.log.Error("push handler panic", "kind", h.kind, "panic_type", fmt.Sprintf("%T", p), "stack", string(debug.Stack()))
			st.Status, st.Reason = http.StatusInternalServerError, ReasonPanic
			http.Error(w, "internal error", st.Status)
		}
		st.Duration = time.Since(start)
		h.metrics.ObserveRequest(st)
	}()

	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		st.Status, st.Reason = http.StatusMethodNotAllowed, ReasonMethod
		http.Error(w, "method not allowed", st.Status)
		return
	}
	lim := h.lim
	lim.res = h.budget.reserve()
	// Held until the answer: the decoded entries live as long as the body.
	defer lim.res.release()
	entries, sz, err := h.decode(r, lim)
	st.Entries, st.CompressedBytes, st.DecompressedBytes = len(entries), sz.compressed, sz.decompressed
	if errors.Is(err, ErrUnavailable) {
		h.unavailable(w, &st, err, err.Error()) // a budget error: content-free
		return
	}
	if err != nil {
		st.Status, st.Reason = decodeStatus(err)
		// Decode errors are content-free by construction, so they may be
		// logged and returned verbatim.
		h.log.Warn("push rejected", "kind", h.kind, "status", st.Status, "error", err)
		http.Error(w, err.Error(), st.Status)
		return
	}
	if len(entries) > 0 {
		if err := h.sink.Accept(r.Context(), entries); err != nil {
			h.sinkFailed(w, r, &st, err)
			return
		}
	}
	st.Status = http.StatusNoContent
	w.WriteHeader(st.Status)
}

func (h *handler) sinkFailed(w http.ResponseWriter, r *http.Request, st *RequestStats, err error) {
	// A cancelled request context means the client is gone or the server is
	// shutting down; either way it is a retryable condition, not a bug.
	if errors.Is(err, ErrUnavailable) || r.Context().Err() != nil {
		// Sink errors may quote ClickHouse, which may quote data: not sent.
		h.unavailable(w, st, err, "")
		return
	}
	// The sink refused the content (labels it cannot store): the client
	// must fix it, so say why. Sink messages name labels, never lines.
	if errors.Is(err, ErrBadRequest) {
		st.Status, st.Reason = http.StatusBadRequest, ReasonBadRequest
		h.log.Warn("push rejected", "kind", h.kind, "status", st.Status, "error", err)
		http.Error(w, err.Error(), st.Status)
		return
	}
	st.Status, st.Reason = http.StatusInternalServerError, ReasonSinkError
	h.log.Error("push sink failed", "kind", h.kind, "entries", st.Entries, "error", err)
	http.Error(w, "internal error", st.Status)
}

// unavailable answers 503 with Retry-After: the client should retry.
func (h *handler) unavailable(w http.ResponseWriter, st *RequestStats, err error, detail string) {
	st.Status, st.Reason = http.StatusServiceUnavailable, ReasonUnavailable
	h.log.Warn("push unavailable", "kind", h.kind, "entries", st.Entries, "error", err)
	w.Header().Set("Retry-After", strconv.Itoa(int((h.retryAfter+time.Second-1)/time.Second)))
	msg := "temporarily unavailable, retry later"
	if detail != "" {
		msg += ": " + detail
	}
	http.Error(w, msg, st.Status)
}

// decodeStatus maps a decode error to a status and a reason.
func decodeStatus(err error) (int, string) {
	switch {
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge, ReasonTooLarge
	case errors.Is(err, ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, ReasonUnsupportedMedia
	default:
		return http.StatusBadRequest, ReasonBadRequest
	}
}
