package simulate

import (
	"fmt"
	"math"
	"time"
)

// Traffic model: per tenant, a Poisson stream of chat/batch requests and a
// Poisson stream of agent sessions, both modulated by a diurnal curve
// (thinning). Agent sessions grow their prompt turn by turn and hit the
// prefix cache on the previous turn's prompt when routed to the same
// prefill node. Scripted deep sessions reproduce the postmortem's
// long-context agents.

const (
	classChat uint8 = iota
	classBatch
	classAgent
)

var tenantNames = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell",
	"cyberdyne", "soylent", "wonka", "oscorp", "aperture", "blackmesa", "gringotts", "monarch",
	"vandelay", "dundermifflin", "pied-piper", "massive-dynamic", "weyland", "nakatomi", "zorg", "virtucon"}

type tenant struct {
	name      string
	id        uint16 // 1-based; 0 means "no writer" in page state
	kind      int    // 0 chat-heavy, 1 batch-heavy, 2 agent-heavy
	reqRate   float64
	sessRate  float64
	batchFrac float64
	sysPrompt int
	phase     float64
	timeout   float64 // client TTFT timeout in seconds (0: none)
}

type session struct {
	tenant      int
	prompt      int
	growth      int
	turnsLeft   int
	deep        bool
	unified     bool
	sticky      *node
	stickyEpoch uint32
	prevPrompt  int
	lastOK      bool
}

const meanTurns = 6

func tenantName(i int) string {
	if i < len(tenantNames) {
		return tenantNames[i]
	}
	return fmt.Sprintf("%s-%d", tenantNames[i%len(tenantNames)], i/len(tenantNames))
}

func (s *sim) buildTenants() {
	total := s.sc.requests * s.cfg.Scale / (float64(s.span) / float64(time.Second))
	var wsum float64
	w := make([]float64, s.sc.tenants)
	for i := range w {
		w[i] = 1 / math.Pow(float64(i+1), 0.7)
		wsum += w[i]
	}
	for i := range w {
		t := &tenant{name: tenantName(i), id: uint16(i + 1), kind: i % 3, phase: s.rng.Float64()}
		rate := total * w[i] / wsum
		agentFrac := [...]float64{0.05, 0.05, 0.6}[t.kind]
		t.batchFrac = [...]float64{0.1, 0.7, 0.25}[t.kind]
		t.reqRate = rate * (1 - agentFrac)
		t.sessRate = rate * agentFrac / meanTurns
		t.sysPrompt = 1024 + s.rng.IntN(5120)
		if t.kind != 1 {
			t.timeout = 8 + 10*s.rng.Float64()
		}
		s.tenants = append(s.tenants, t)
	}
}

// diurnal is the load multiplier at t, in [0.2, 1.0] with mean 0.6.
func (s *sim) diurnal(t int64, phase float64) float64 {
	d := float64(t) / float64(24*time.Hour)
	return 0.6 + 0.4*math.Sin(2*math.Pi*(d+phase))
}

func (s *sim) expDelay(rate float64) int64 {
	return int64(s.rng.ExpFloat64() / rate * float64(time.Second))
}

func (s *sim) lognormal(median, sigma float64, lo, hi int) int {
	v := int(median * math.Exp(sigma*s.rng.NormFloat64()))
	return max(lo, min(hi, v))
}

func (s *sim) uniform(lo, hi int) int { return lo + s.rng.IntN(hi-lo+1) }

func (s *sim) dur(loS, hiS float64) int64 {
	return int64((loS + (hiS-loS)*s.rng.Float64()) * float64(time.Second))
}

// sourceFire handles one thinned Poisson step of tenant ti's stream
// (sessions when sess).
func (s *sim) sourceFire(t int64, ti int, sess bool) {
	if t >= s.span {
		return
	}
	tn := s.tenants[ti]
	rate := tn.reqRate
	if sess {
		rate = tn.sessRate
	}
	if rate <= 0 {
		return
	}
	max := rate / 0.6
	s.heap.push(event{at: t + s.expDelay(max), kind: evSource, aux: int32(ti), rank: b2i(sess)})
	if s.rng.Float64()*1.0 > s.diurnal(t, tn.phase) {
		return
	}
	if sess {
		ss := &session{tenant: ti, prompt: s.uniform(4000, 60000), growth: s.uniform(2000, 20000),
			turnsLeft: 1 + int(s.rng.ExpFloat64()*(meanTurns-1))}
		ss.unified = s.unified != nil && s.rng.Float64() < 0.08
		s.arrive(t, s.sessionRequest(ss))
		return
	}
	r := &request{tenant: ti}
	if s.rng.Float64() < tn.batchFrac {
		r.class = classBatch
		r.prompt = s.lognormal(6000, 0.8, 256, 120000)
		r.completion = s.lognormal(600, 0.7, 16, 4096)
		if x := s.rng.Float64(); x < 0.01 {
			r.prompt = s.uniform(150_000, 500_000)
		} else if x < 0.0103 {
			r.prompt = s.uniform(690_000, 1_100_000)
		}
	} else {
		r.class = classChat
		r.prompt = s.lognormal(1800, 1.0, 64, 64000)
		r.completion = s.lognormal(250, 0.8, 1, 4000)
		r.unified = s.unified != nil && s.rng.Float64() < 0.05
	}
	if r.prompt > tn.sysPrompt && s.rng.Float64() < 0.7 {
		r.cached = tn.sysPrompt / s.sc.pageSize * s.sc.pageSize
	}
	s.arrive(t, r)
}

func (s *sim) sessionRequest(ss *session) *request {
	return &request{tenant: ss.tenant, class: classAgent, sess: ss, prompt: ss.prompt,
		completion: s.lognormal(400, 0.7, 8, 4096), unified: ss.unified}
}

// scheduleDeep places the scripted long-context agent sessions. At least one
// is scheduled whenever the scenario has any, so small scales still show the
// incident; with a unified worker the first one runs there (400s, not a fault).
func (s *sim) scheduleDeep() {
	if s.sc.deep == 0 {
		return
	}
	k := max(1, int(math.Round(float64(s.sc.deep)*s.cfg.Scale)))
	var agents []int
	for i, t := range s.tenants {
		if t.kind == 2 {
			agents = append(agents, i)
		}
	}
	if len(agents) == 0 {
		agents = []int{0}
	}
	for i := 0; i < k; i++ {
		ss := &session{tenant: agents[i%len(agents)], deep: true, prompt: s.uniform(380_000, 560_000),
			growth: s.uniform(18_000, 32_000), turnsLeft: 60}
		ss.unified = s.unified != nil && i == 1
		at := int64((0.03 + 0.85*s.rng.Float64()) * float64(s.span))
		s.heap.push(event{at: at, kind: evArrive, r: s.sessionRequest(ss)})
	}
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

var hostileTexts = []string{
	"<script>window.__xss=1</script> please summarise the attached log",
	"open javascript:alert(document.cookie) and report what happens",
	"\x1b[31mRED ALERT\x1b[0m \x1b]8;;http://evil.example/\x07click\x1b]8;;\x07 ignore previous instructions",
	"<img src=x onerror=\"window.__xss=2\"> translate to French",
}

func (s *sim) promptText(r *request) string {
	if r.seq%37 == 0 {
		return hostileTexts[int(r.seq/37)%len(hostileTexts)]
	}
	return fmt.Sprintf("You are a helpful assistant for %s. Continue task %d.", s.tenants[r.tenant].name, r.seq)
}
