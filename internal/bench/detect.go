package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kvtrail/kvtrail/internal/apitoken"
	"github.com/kvtrail/kvtrail/internal/chstore"
	"github.com/kvtrail/kvtrail/internal/freeport"
)

// DetectStore is what bench detect reads findings through: a connection to
// the ClickHouse server the started kvtrail serve writes to.
type DetectStore interface {
	DropDatabase(ctx context.Context, db string) error
}

// findingCounter counts a run's HIGH findings (a store of its database).
type findingCounter interface {
	HighFindingsSince(ctx context.Context, since time.Time) (map[string]int, error)
}

// DetectOptions configures `kvtrail bench detect`.
type DetectOptions struct {
	// Binary is the kvtrail executable started as `serve` and
	// `simulate serve`.
	Binary string
	// ClickHouseAddr (host:port, native) and credentials the started serve uses.
	ClickHouseAddr, ClickHouseUser, ClickHousePassword string
	Runs                                               int
	// Warmup is how long traffic and probes run before the bug is turned on.
	Warmup time.Duration
	// Timeout bounds the wait for each finding after the bug is on; in a
	// control run (BugOn false) it is how long nothing must happen.
	Timeout time.Duration
	// BugOn reboots the prefill with a pool below the context length on
	// SGLang 0.5.11; otherwise on 0.5.22 (fixed): the control.
	BugOn bool
	// Rate is the background request rate (requests per second).
	Rate float64
	// Dir holds each run's config and process logs.
	Dir string
	Log *slog.Logger
}

// DetectRun is one run's measurements. Latencies are -1 when the finding
// did not come within the timeout.
type DetectRun struct {
	BugOn        time.Time     `json:"bug_on"`
	FirstLeak    time.Time     `json:"first_leak"`
	Leaked       int           `json:"leaked_responses"`
	ProbeSeen    time.Time     `json:"probe_finding_seen"`
	LogSeen      time.Time     `json:"log_finding_seen"`
	ProbeLatency time.Duration `json:"probe_latency"`
	LogLatency   time.Duration `json:"log_latency"`
	// HighByAnalyzer counts HIGH findings by analyzer at the end of the run.
	HighByAnalyzer map[string]int `json:"high_by_analyzer"`
}

// Live cluster shape used by every run: an 8192-word context; the prefill
// pool starts at twice that (no window) and the bug reboots it to 4096.
const (
	detectContext  = 8192
	detectPoolOK   = 16384
	detectPoolLow  = 4096
	probeAnalyzer  = "canary_probe"
	pollEvery      = 250 * time.Millisecond
	processTimeout = 60 * time.Second
)

// logAnalyzers are the analyzers that read the pushed logs (every analyzer
// but the prober's and the posture comparison).
func logAnalyzer(name string) bool { return name != probeAnalyzer && name != "posture_regression" }

// Detect runs opts.Runs runs, each with a fresh database, kvtrail serve and
// simulate serve.
func Detect(ctx context.Context, st DetectStore, opts DetectOptions) ([]DetectRun, error) {
	if opts.Runs < 1 {
		opts.Runs = 1
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	var out []DetectRun
	for i := 1; i <= opts.Runs; i++ {
		r, err := detectOnce(ctx, st, opts, i)
		if err != nil {
			return out, fmt.Errorf("run %d: %w", i, err)
		}
		opts.Log.Info("bench detect run", slog.Int("run", i), slog.Duration("probe_latency", r.ProbeLatency),
			slog.Duration("log_latency", r.LogLatency), slog.Int("leaked", r.Leaked))
		out = append(out, r)
	}
	return out, nil
}

func detectOnce(ctx context.Context, st DetectStore, opts DetectOptions, run int) (res DetectRun, err error) {
	res.ProbeLatency, res.LogLatency = -1, -1
	db := fmt.Sprintf("kvtrail_detect_%d_%d", os.Getpid(), run)
	dir := filepath.Join(opts.Dir, fmt.Sprintf("run-%d", run))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	defer func() { _ = st.DropDatabase(context.WithoutCancel(ctx), db) }()
	servePort, err := freeport.Pick()
	if err != nil {
		return res, err
	}
	livePort, err := freeport.Pick()
	if err != nil {
		return res, err
	}
	k1, k2 := secret(), secret()
	ingestTok, hash, err := apitoken.New()
	if err != nil {
		return res, err
	}
	serveURL := fmt.Sprintf("http://127.0.0.1:%d", servePort)
	liveURL := fmt.Sprintf("http://127.0.0.1:%d", livePort)
	cfg := map[string]any{
		"clickhouse": map[string]any{"addr": opts.ClickHouseAddr, "database": db, "username": opts.ClickHouseUser},
		"serve":      map[string]any{"addr": fmt.Sprintf("127.0.0.1:%d", servePort), "export_dir": filepath.Join(dir, "exports")},
		"auth":       map[string]any{"tokens": []map[string]string{{"name": "live-shipper", "role": "ingester", "token_hash": hash}}},
		"alerts":     map[string]any{"enabled": true, "interval": "2s", "lookback": "5m", "repeat_interval": "1h"},
		"probes": map[string]any{"enabled": true, "endpoint": liveURL, "model": "sim-model", "per_hour": 7200, "min_interval": "2s",
			"max_tokens": 16, "max_prompt_tokens": 2 * detectContext, "margin": 64, "timeout": "30s",
			"identities": []map[string]string{{"name": "canary-a", "api_key": k1}, {"name": "canary-b", "api_key": k2}}},
	}
	b, _ := yaml.Marshal(cfg)
	cfgPath := filepath.Join(dir, "kvtrail.yaml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return res, err
	}
	env := []string{"KVTRAIL_CLICKHOUSE_PASSWORD=" + opts.ClickHousePassword, "KVTRAIL_PUSH_TOKEN=" + ingestTok}
	serve, err := start(ctx, opts.Binary, dir, "serve", env, "--config", cfgPath, "serve")
	if err != nil {
		return res, err
	}
	defer serve.stop()
	if err := waitHTTP(ctx, serveURL+"/healthz", processTimeout); err != nil {
		return res, fmt.Errorf("kvtrail serve did not come up (see %s): %w", serve.logPath, err)
	}
	version := "0.5.11"
	if !opts.BugOn {
		version = "0.5.22"
	}
	rate := opts.Rate
	if rate <= 0 {
		rate = 5
	}
	liveCmd, err := start(ctx, opts.Binary, dir, "live", env, "--config", cfgPath, "simulate", "serve",
		"--addr", fmt.Sprintf("127.0.0.1:%d", livePort), "--push", serveURL+"/loki/api/v1/push",
		"--context-len", fmt.Sprint(detectContext), "--prefill-pool", fmt.Sprint(detectPoolOK), "--sglang-version", version,
		"--rate", fmt.Sprint(rate), "--tenants", "8", "--long-share", "0.05")
	if err != nil {
		return res, err
	}
	defer liveCmd.stop()
	if err := waitHTTP(ctx, liveURL+"/admin/state", processTimeout); err != nil {
		return res, fmt.Errorf("simulate serve did not come up (see %s): %w", liveCmd.logPath, err)
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(opts.Warmup):
	}
	// Turn the bug on: a redeploy of the prefill with a smaller KV pool.
	body, _ := json.Marshal(map[string]any{"prefill_pool": detectPoolLow})
	resp, err := http.Post(liveURL+"/admin/reboot", "application/json", bytes.NewReader(body))
	if err != nil {
		return res, fmt.Errorf("reboot the live cluster: %w", err)
	}
	resp.Body.Close()
	res.BugOn = time.Now()
	// The serve's findings are read through a store of its own database,
	// as any kvtrail process reads them (no cross-database names).
	runStore, err := chstore.Open(ctx, chstore.Options{Addrs: []string{opts.ClickHouseAddr}, Database: db,
		Username: opts.ClickHouseUser, Password: opts.ClickHousePassword})
	if err != nil {
		return res, fmt.Errorf("open the serve's database: %w", err)
	}
	defer runStore.Close()
	deadline := res.BugOn.Add(opts.Timeout)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(pollEvery):
		}
		now := time.Now()
		first, leaked, err := liveState(liveURL)
		if err == nil {
			res.FirstLeak, res.Leaked = first, leaked
		}
		high, err := highFindings(ctx, runStore, res.BugOn)
		if err != nil {
			continue // the serve's tables may not exist for a moment
		}
		for a := range high {
			if a == probeAnalyzer && res.ProbeSeen.IsZero() {
				res.ProbeSeen = now
			}
			if logAnalyzer(a) && res.LogSeen.IsZero() {
				res.LogSeen = now
			}
		}
		if opts.BugOn && !res.ProbeSeen.IsZero() && !res.LogSeen.IsZero() && !res.FirstLeak.IsZero() {
			break
		}
	}
	if res.HighByAnalyzer, err = highFindings(ctx, runStore, res.BugOn); err != nil {
		return res, err
	}
	if !res.FirstLeak.IsZero() {
		if !res.ProbeSeen.IsZero() {
			res.ProbeLatency = res.ProbeSeen.Sub(res.FirstLeak)
		}
		if !res.LogSeen.IsZero() {
			res.LogLatency = res.LogSeen.Sub(res.FirstLeak)
		}
	}
	return res, nil
}

// highFindings counts HIGH findings per analyzer about requests at or
// after since.
func highFindings(ctx context.Context, st findingCounter, since time.Time) (map[string]int, error) {
	return st.HighFindingsSince(ctx, since.Add(-time.Second))
}

func liveState(url string) (time.Time, int, error) {
	resp, err := http.Get(url + "/admin/state")
	if err != nil {
		return time.Time{}, 0, err
	}
	defer resp.Body.Close()
	var s struct {
		Stats struct {
			Leaked    int       `json:"leaked"`
			FirstLeak time.Time `json:"first_leak"`
		} `json:"stats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return time.Time{}, 0, err
	}
	return s.Stats.FirstLeak, s.Stats.Leaked, nil
}

type proc struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func start(ctx context.Context, bin, dir, name string, env []string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// stop ends the process it started: SIGTERM, then SIGKILL after 15 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	var last error
	for time.Now().Before(end) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s: %s", url, resp.Status)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}

func secret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Percentiles returns the p50 and max of the non-negative durations in ds,
// and how many were missing (negative).
func Percentiles(ds []time.Duration) (p50, maxD time.Duration, missing int) {
	var ok []time.Duration
	for _, d := range ds {
		if d < 0 {
			missing++
			continue
		}
		ok = append(ok, d)
	}
	if len(ok) == 0 {
		return -1, -1, missing
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i] < ok[j] })
	return ok[(len(ok)-1)/2], slices.Max(ok), missing
}
