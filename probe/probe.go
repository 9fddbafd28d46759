// Package probe is a canary marker prober for OpenAI-compatible chat
// endpoints. Every prompt carries a unique marker and asks for it back;
// every answer is searched for any other probe's marker (one tenant's data
// in another's answer is the incident this product exists for), and
// prompts placed just above a node's rejection threshold (from posture)
// must be refused: an HTTP 200 there is the #30233 symptom. Probes are
// sent from at least two identities (API keys) so the provider sees two
// tenants, and prompt length is calibrated from the endpoint's own
// usage.prompt_tokens.
package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Identity is one API key the probes are sent with.
type Identity struct {
	Name string
	Key  string
}

// Config says where and how to probe.
type Config struct {
	// Endpoint is the base URL; /v1/chat/completions is appended.
	Endpoint string
	Model    string
	// Identities: at least two, so a cross-tenant answer can be told
	// from a same-tenant one.
	Identities []Identity
	// MaxTokens bounds each answer.
	MaxTokens int
	// MaxPromptTokens bounds the long probes: a threshold probe larger
	// than this is skipped (and reported as skipped), never sent.
	MaxPromptTokens uint64
	// Margin places long probes at threshold-Margin and threshold+Margin.
	Margin uint64
	// Timeout per request.
	Timeout time.Duration
	// HTTP client; nil means one with Timeout.
	HTTP *http.Client
}

// Threshold is one node's rejection threshold (posture's
// reject_threshold): prompts of at least Tokens must be refused.
type Threshold struct {
	Node       string
	Tokens     uint64
	ContextLen uint64
}

// Probe kinds.
const (
	KindShort     = "short"
	KindCalibrate = "calibrate"
	KindBelow     = "below_threshold"
	KindAbove     = "above_threshold"
)

// Verdicts.
const (
	VerdictOK              = "ok"
	VerdictLeak            = "leak"              // another probe's marker in the answer
	VerdictOverLimitServed = "over_limit_served" // 200 where a 4xx belongs
	VerdictRejectedBelow   = "rejected_below"    // a prompt under the threshold was refused
	VerdictMiscalibrated   = "miscalibrated"     // the endpoint counted the prompt on the other side of the threshold
	VerdictError           = "error"             // not sent, 5xx, or an unreadable answer
	VerdictSkipped         = "skipped"           // over the prompt-token budget
)

// Result is one probe request and its verdict.
type Result struct {
	TS               time.Time
	ID               string
	RoundID          string
	Identity         string
	Endpoint, Model  string
	Kind             string
	Stream           bool
	Marker           string
	TargetTokens     uint64
	Threshold        uint64
	ThresholdNode    string
	PromptTokens     uint64
	CompletionTokens uint64
	Status           int
	Latency          time.Duration
	FinishReason     string
	Text             string // the answer, cut to maxKeptText
	Err              string
	ForeignMarkers   []string
	ForeignProbes    []string
	Verdict          string
}

// Finding reports whether the result is a finding (a leak or an
// over-limit prompt served).
func (r *Result) Finding() bool {
	return r.Verdict == VerdictLeak || r.Verdict == VerdictOverLimitServed
}

const maxKeptText = 2048

// Prober sends rounds of probes and remembers every marker it sent, so an
// answer carrying one can be traced to the probe (and identity) it came from.
type Prober struct {
	cfg Config
	hc  *http.Client

	mu      sync.Mutex
	sent    map[string]sentProbe // marker -> probe
	order   []string             // markers, oldest first (bounded)
	cal     *calibration
	rounds  int
	nowFunc func() time.Time
}

type sentProbe struct {
	id, identity string
	ts           time.Time
}

// maxRemembered bounds the markers kept for tracing.
const maxRemembered = 100000

// New checks cfg and returns a prober.
func New(cfg Config) (*Prober, error) {
	var errs []error
	if cfg.Endpoint == "" {
		errs = append(errs, errors.New("probe: endpoint is empty"))
	}
	if len(cfg.Identities) < 2 {
		errs = append(errs, fmt.Errorf("probe: %d identities; at least two are needed to tell a cross-tenant answer", len(cfg.Identities)))
	}
	names := map[string]bool{}
	for _, id := range cfg.Identities {
		if id.Name == "" || names[id.Name] {
			errs = append(errs, fmt.Errorf("probe: identity name %q is empty or repeated", id.Name))
		}
		names[id.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 32
	}
	if cfg.Margin == 0 {
		cfg.Margin = 64
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	return &Prober{cfg: cfg, hc: hc, sent: map[string]sentProbe{}, nowFunc: time.Now}, nil
}

// markerRE matches any kvtrail probe marker.
var markerRE = regexp.MustCompile(`KVT-[0-9a-f]{16}`)

func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// filler is the repeated unit of long prompts: plain words every tokenizer
// splits the same way each time, so prompt tokens grow linearly with units.
const filler = " the quick brown fox jumps over the lazy dog and keeps on running."

func prompt(marker string, units int) string {
	var b strings.Builder
	b.Grow(len(filler)*units + 200)
	b.WriteString("This is an automated isolation canary. Reply with exactly this code and nothing else: ")
	b.WriteString(marker)
	b.WriteString("\n")
	for range units {
		b.WriteString(filler)
	}
	b.WriteString("\nReply with the code ")
	b.WriteString(marker)
	return b.String()
}

// calibration is prompt_tokens = base + perUnit*units, measured.
type calibration struct {
	base, perUnit float64
}

func (c *calibration) units(target uint64) int {
	u := (float64(target) - c.base) / c.perUnit
	if u < 0 {
		return 0
	}
	return int(math.Round(u))
}

// calUnits is the second calibration prompt's size.
const calUnits = 32

// PlannedPerRound is how many requests one round sends for n thresholds
// (calibration excluded): one short probe per identity, two per threshold.
func (p *Prober) PlannedPerRound(n int) int { return len(p.cfg.Identities) + 2*n }

// Round sends one round: a short probe from every identity (alternating
// streaming and not between rounds), then for each threshold a probe just
// below and one just above it. Every answer is checked against every
// marker sent so far, including this round's.
func (p *Prober) Round(ctx context.Context, thresholds []Threshold) ([]Result, error) {
	p.mu.Lock()
	p.rounds++
	stream := p.rounds%2 == 0
	p.mu.Unlock()
	round := newID(6)
	var out []Result
	for i, id := range p.cfg.Identities {
		out = append(out, p.send(ctx, round, id, KindShort, stream != (i%2 == 1), 0, 0, Threshold{}))
	}
	if len(thresholds) > 0 {
		cal, calResults, err := p.calibrate(ctx, round)
		out = append(out, calResults...)
		for k, th := range thresholds {
			below, above := th.Tokens-min(th.Tokens, p.cfg.Margin), th.Tokens+p.cfg.Margin
			for j, kind := range []string{KindBelow, KindAbove} {
				// Below and above go out under different identities: what
				// the one above reads from stale pages is then the other
				// tenant's prompt, a cross-tenant leak.
				id := p.cfg.Identities[(k+j)%len(p.cfg.Identities)]
				target := below
				if kind == KindAbove {
					target = above
				}
				r := Result{TS: p.nowFunc().UTC(), ID: newID(8), RoundID: round, Identity: id.Name, Endpoint: p.cfg.Endpoint,
					Model: p.cfg.Model, Kind: kind, TargetTokens: target, Threshold: th.Tokens, ThresholdNode: th.Node}
				switch {
				case err != nil:
					r.Verdict, r.Err = VerdictSkipped, "not calibrated: "+err.Error()
				case p.cfg.MaxPromptTokens > 0 && target > p.cfg.MaxPromptTokens:
					r.Verdict, r.Err = VerdictSkipped, fmt.Sprintf("target %d tokens is over the probe budget max_prompt_tokens %d", target, p.cfg.MaxPromptTokens)
				default:
					r = p.send(ctx, round, id, kind, stream, cal.units(target), target, th)
				}
				out = append(out, r)
			}
		}
	}
	return out, ctx.Err()
}

// calibrate measures prompt tokens per filler unit with two probes (which
// are ordinary probes too: their answers are checked for markers).
func (p *Prober) calibrate(ctx context.Context, round string) (*calibration, []Result, error) {
	p.mu.Lock()
	c := p.cal
	p.mu.Unlock()
	if c != nil {
		return c, nil, nil
	}
	id := p.cfg.Identities[0]
	a := p.send(ctx, round, id, KindCalibrate, false, 0, 0, Threshold{})
	b := p.send(ctx, round, id, KindCalibrate, false, calUnits, 0, Threshold{})
	res := []Result{a, b}
	if a.Status != http.StatusOK || b.Status != http.StatusOK || a.PromptTokens == 0 || b.PromptTokens <= a.PromptTokens {
		return nil, res, fmt.Errorf("calibration needs two 200 answers with usage.prompt_tokens (got %d/%d tokens, status %d/%d)",
			a.PromptTokens, b.PromptTokens, a.Status, b.Status)
	}
	c = &calibration{base: float64(a.PromptTokens), perUnit: float64(b.PromptTokens-a.PromptTokens) / calUnits}
	p.mu.Lock()
	p.cal = c
	p.mu.Unlock()
	return c, res, nil
}

func (p *Prober) send(ctx context.Context, round string, id Identity, kind string, stream bool, units int, target uint64, th Threshold) Result {
	marker := "KVT-" + newID(8)
	r := Result{TS: p.nowFunc().UTC(), ID: newID(8), RoundID: round, Identity: id.Name, Endpoint: p.cfg.Endpoint, Model: p.cfg.Model,
		Kind: kind, Stream: stream, Marker: marker, TargetTokens: target, Threshold: th.Tokens, ThresholdNode: th.Node}
	p.remember(marker, sentProbe{id: r.ID, identity: id.Name, ts: r.TS})
	a := chat(ctx, p.hc, p.cfg.Endpoint, id.Key, p.cfg.Model, prompt(marker, units), p.cfg.MaxTokens, stream)
	r.Status, r.PromptTokens, r.CompletionTokens, r.Latency, r.FinishReason = a.Status, a.PromptTokens, a.CompletionTokens, a.Latency, a.FinishReason
	r.Text, r.Err = cut(a.Text, maxKeptText), cut(a.Err, maxKeptText)
	r.Verdict = p.judge(&r, a)
	return r
}

// judge decides the verdict. A foreign marker wins over everything: it is
// the leak itself, whatever the status.
func (p *Prober) judge(r *Result, a answer) string {
	for _, m := range markerRE.FindAllString(a.Text+"\n"+a.Err, -1) {
		if m == r.Marker || contains(r.ForeignMarkers, m) {
			continue
		}
		r.ForeignMarkers = append(r.ForeignMarkers, m)
		p.mu.Lock()
		sp, ok := p.sent[m]
		p.mu.Unlock()
		if ok {
			r.ForeignProbes = append(r.ForeignProbes, sp.id)
		} else {
			r.ForeignProbes = append(r.ForeignProbes, "")
		}
	}
	if len(r.ForeignMarkers) > 0 {
		return VerdictLeak
	}
	switch {
	case a.Status == 0 || a.Status >= 500:
		return VerdictError
	case r.Kind == KindAbove && a.Status == http.StatusOK:
		// The endpoint may count the prompt differently from the
		// calibration; a 200 whose reported prompt is clearly under the
		// threshold is a sizing miss, not a finding. The #30233 path
		// reports prompt_tokens=1 (the placeholder): that is a finding.
		if a.HasUsage && a.PromptTokens > 1 && a.PromptTokens < r.Threshold {
			return VerdictMiscalibrated
		}
		return VerdictOverLimitServed
	case r.Kind == KindBelow && a.Status >= 400:
		return VerdictRejectedBelow
	case a.Status >= 400 && r.Kind != KindAbove:
		return VerdictError
	case a.Status == http.StatusOK && a.Err != "":
		return VerdictError
	}
	return VerdictOK
}

func (p *Prober) remember(marker string, sp sentProbe) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent[marker] = sp
	p.order = append(p.order, marker)
	if len(p.order) > maxRemembered {
		delete(p.sent, p.order[0])
		p.order = p.order[1:]
	}
}

// ProbeOf returns the probe id and identity that sent marker, if known.
func (p *Prober) ProbeOf(marker string) (id, identity string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sp, ok := p.sent[marker]
	return sp.id, sp.identity, ok
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
