package web

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kvtrail/kvtrail/internal/config"
	"github.com/kvtrail/kvtrail/internal/testdb"
)

// testToken is a fixed well-formed API token per name (id and secret
// derived from the name), so tests can name tokens without storing them.
func testToken(name string) string {
	id := sha256.Sum256([]byte("kvtrail-test-token-id\x00" + name))
	secret := sha256.Sum256([]byte("kvtrail-test-token-secret\x00" + name))
	return "kvt_" + hex.EncodeToString(id[:8]) + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
}

// --- helpers ---

// cpuTime is the CPU (user + system) this process has used.
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bcryptCPU is the CPU time of one bcrypt verification of a hash of cost.
func bcryptCPU(t testing.TB, cost int) time.Duration {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte("reference password"), cost)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	start := cpuTime(t)
	_ = bcrypt.CompareHashAndPassword(h, []byte("wrong password"))
	return cpuTime(t) - start
}

// formLogin posts the login form as a fresh browser would; xff, when set,
// is sent as X-Forwarded-For on both requests.
func formLogin(t testing.TB, base, user, password, xff string) *http.Response {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(req *http.Request) *http.Response {
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/login", nil)
	resp := do(req)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("login form has no CSRF token: %.300s", b)
	}
	form := url.Values{"username": {user}, "password": {password}, "_csrf": {string(m[1])}}
	req, _ = http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp = do(req)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func bearer(t testing.TB, method, u, tok string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func checkRetryAfter(t testing.TB, resp *http.Response, maxSeconds int) {
	t.Helper()
	n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || n < 1 || n > maxSeconds {
		t.Errorf("Retry-After = %q, want 1..%d seconds", resp.Header.Get("Retry-After"), maxSeconds)
	}
}

func withAuth(f func(*config.Auth)) func(*Options) { return func(o *Options) { f(&o.Auth) } }

func costUser(t testing.TB, name, role string, cost int) config.User {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(testPassword), cost)
	if err != nil {
		t.Fatal(err)
	}
	return config.User{Name: name, Role: role, PasswordHash: config.Secret(h)}
}

// wrongTokens are n distinct wrong credentials of every shape: well-formed
// with an unknown id, a known id with a wrong secret, the id-less shape of
// older kvtrail tokens, and garbage.
func wrongTokens(n int, knownID string) []string {
	out := make([]string, n)
	for i := range out {
		w := testToken(fmt.Sprint("wrong-", i))
		switch i % 4 {
		case 1:
			w = knownID[:21] + w[21:]
		case 2:
			w = "kvt_" + w[21:]
		case 3:
			w = fmt.Sprintf("not-a-token-%d", i)
		}
		out[i] = w
	}
	return out
}

// --- issue 17, security 1: wrong tokens cost no bcrypt ---

// 40 concurrent requests with different wrong tokens, against the API and
// the push endpoint, cost less CPU together than one bcrypt verification
// at the cost `kvtrail user hash-password` uses (12). Before token ids each
// cost one bcrypt per configured token.
func TestWrongTokenFloodIsCheap(t *testing.T) {
	u := newTestUI(t, testdb.New(t))
	ing, _ := ingestServer(t)
	ref := bcryptCPU(t, 12)
	toks := wrongTokens(40, testToken("admin"))
	flood := func(url string, method string) (time.Duration, map[int]int) {
		runtime.GC()
		start := cpuTime(t)
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		for _, tok := range toks {
			wg.Add(1)
			go func(tok string) {
				defer wg.Done()
				resp := bearer(t, method, url, tok, `{"line":"x","node":"n"}`+"\n")
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}(tok)
		}
		wg.Wait()
		return cpuTime(t) - start, codes
	}
	for _, tt := range []struct{ name, url, method string }{
		{"api", u.srv.URL + "/api/v1/me", http.MethodGet},
		{"push", ing.URL + "/ingest/v1/lines", http.MethodPost},
	} {
		cpu, codes := flood(tt.url, tt.method)
		t.Logf("%s: 40 wrong tokens cost %v CPU; one bcrypt(12) verification %v; answers %v", tt.name, cpu, ref, codes)
		if codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != len(toks) {
			t.Errorf("%s: answers %v, want only 401 and 429", tt.name, codes)
		}
		if cpu >= ref {
			t.Errorf("%s: 40 wrong tokens cost %v CPU, not less than one bcrypt verification (%v)", tt.name, cpu, ref)
		}
	}
	if resp := bearer(t, http.MethodGet, u.srv.URL+"/api/v1/me", testToken("admin"), ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("valid token after the flood = %d", resp.StatusCode)
	}
}

// Concurrent bcrypt checks are bounded: a burst of logins gets 503 with
// Retry-After beyond the bound instead of queueing on every core, and the
// burst costs CPU only for the checks that ran.
func TestPasswordChecksAreBounded(t *testing.T) {
	u := newTestUI(t, testdb.New(t), withAuth(func(a *config.Auth) {
		a.Users = append(a.Users, costUser(t, "alice", "viewer", 12))
	}))
	ref := bcryptCPU(t, 12)
	const n = 40
	type prepared struct {
		c    *http.Client
		form url.Values
	}
	var ps []prepared
	for i := 0; i < n; i++ {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(u.srv.URL + "/login")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(b)
		// Distinct unknown names: the limiter refuses none of them, so only
		// the bound on bcrypt checks stands between the burst and the CPU.
		ps = append(ps, prepared{c, url.Values{"username": {fmt.Sprint("spray-", i)}, "password": {"x"}, "_csrf": {string(m[1])}}})
	}
	runtime.GC()
	start := cpuTime(t)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func(p prepared) {
			defer wg.Done()
			resp, err := p.c.PostForm(u.srv.URL+"/login", p.form)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				checkRetryAfter(t, resp, 5)
			}
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}(p)
	}
	wg.Wait()
	cpu := cpuTime(t) - start
	checked := codes[http.StatusUnauthorized]
	t.Logf("%d concurrent logins: answers %v, %v CPU, one bcrypt(12) verification %v", n, codes, cpu, ref)
	if codes[http.StatusServiceUnavailable] == 0 || checked+codes[http.StatusServiceUnavailable] != n {
		t.Fatalf("answers %v: want some 503 and the rest 401", codes)
	}
	if limit := time.Duration(checked+2) * ref * 3 / 2; cpu > limit {
		t.Errorf("burst cost %v CPU for %d checks, more than 1.5 × (checks + 2) bcrypt verifications (%v)", cpu, checked, limit)
	}
	if resp := formLogin(t, u.srv.URL, "alice", testPassword, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice after the burst = %d", resp.StatusCode)
	}
}

// --- issue 17, security 2: no user enumeration by timing ---

// A login for an unknown name takes as long as one for an existing name
// with a wrong password: the dummy hash has the real users' cost.
func TestUnknownUserCostsTheSameAsKnown(t *testing.T) {
	u := newTestUI(t, testdb.New(t), withAuth(func(a *config.Auth) {
		a.Users = append(a.Users, costUser(t, "alice", "viewer", 10))
	}))
	median := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	var known, unknown []time.Duration
	for i := 0; i < 5; i++ { // 5 = login_attempts: alice is never limited here
		for _, name := range []string{"alice", fmt.Sprint("nobody-", i)} {
			start := time.Now()
			resp := formLogin(t, u.srv.URL, name, "wrong password", "")
			d := time.Since(start)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s = %d", name, resp.StatusCode)
			}
			if name == "alice" {
				known = append(known, d)
			} else {
				unknown = append(unknown, d)
			}
		}
	}
	k, n := median(known), median(unknown)
	ratio := float64(k) / float64(n)
	t.Logf("median login: existing user %v, unknown user %v, ratio %.2f", k, n, ratio)
	if ratio < 0.5 || ratio > 2 {
		t.Errorf("existing/unknown login time ratio %.2f, want within 0.5..2", ratio)
	}
}

// --- issue 17, security 3: logout ends the session everywhere ---

// After logout the old cookie is refused by the instance that logged out
// and by another instance sharing the session key and ClickHouse.
func TestLogoutEndsTheSessionOnEveryInstance(t *testing.T) {
	st := testdb.New(t)
	a := newTestUI(t, st)
	// The same auth section (users, hashes, session key) on both, as on
	// instances behind one load balancer.
	b := newTestUI(t, st, withAuth(func(c *config.Auth) { *c = a.auth }))
	c, csrf, code := a.login(t, "viewer-user", testPassword)
	if code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	au, _ := url.Parse(a.srv.URL)
	var cookie string
	for _, ck := range c.Jar.Cookies(au) {
		if ck.Name == sessionCookie {
			cookie = ck.Value
		}
	}
	withCookie := func(base, path string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusSeeOther && resp.Header.Get("Location") != "/login" {
			t.Errorf("redirect to %q", resp.Header.Get("Location"))
		}
		return resp.StatusCode
	}
	for _, ui := range []*testUI{a, b} {
		if got := withCookie(ui.srv.URL, "/api/v1/me"); got != http.StatusOK {
			t.Fatalf("before logout: %d (cookie %q)", got, cookie)
		}
	}
	resp, err := c.PostForm(a.srv.URL+"/logout", url.Values{"_csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("logout = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for name, ui := range map[string]*testUI{"same instance": a, "other instance": b} {
		if got := withCookie(ui.srv.URL, "/api/v1/me"); got != http.StatusUnauthorized {
			t.Errorf("%s, API with the old cookie = %d, want 401", name, got)
		}
		if got := withCookie(ui.srv.URL, "/"); got != http.StatusSeeOther {
			t.Errorf("%s, page with the old cookie = %d, want 303 to /login", name, got)
		}
	}
	// A new login is a new session and works.
	if _, _, code := b.login(t, "viewer-user", testPassword); code != http.StatusSeeOther {
		t.Fatalf("login after logout = %d", code)
	}
}

type failingSessions struct{}

func (failingSessions) RevokeSession(context.Context, string, string, time.Time) error {
	return errors.New("clickhouse down")
}
func (failingSessions) SessionRevoked(context.Context, string) (bool, error) {
	return false, errors.New("clickhouse down")
}

// A logout that cannot be stored does not pretend: the session is not
// marked revoked, and a session that cannot be checked is not honoured.
func TestRevocationStoreFailures(t *testing.T) {
	a, err := newAuthenticator(testAuth(t), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	a.sessions = failingSessions{}
	p, ok := a.decodeSession(a.encodeSession(a.users["viewer-user"]))
	if !ok {
		t.Fatal("fresh session refused")
	}
	if err := a.revoke(context.Background(), p); err == nil {
		t.Fatal("revoke with a failing store succeeded")
	}
	if _, err := a.isRevoked(context.Background(), p); err == nil {
		t.Fatal("isRevoked with a failing store answered")
	}
}

// --- issue 17, security 4: one limit per (address, account) and token ---

func TestLimitsArePerAccountAndToken(t *testing.T) {
	u := newTestUI(t, testdb.New(t))
	t.Run("wrong logins for one user do not lock out another", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			if resp := formLogin(t, u.srv.URL, "mallory", "guess", ""); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("mallory %d = %d", i, resp.StatusCode)
			}
		}
		resp := formLogin(t, u.srv.URL, "mallory", "guess", "")
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("6th mallory login = %d, want 429", resp.StatusCode)
		}
		checkRetryAfter(t, resp, 60)
		if resp := formLogin(t, u.srv.URL, "admin-user", testPassword, ""); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("admin-user from the same address = %d, want 303", resp.StatusCode)
		}
	})
	t.Run("wrong tokens do not lock out a valid token", func(t *testing.T) {
		admin := testToken("admin")
		got := map[int]int{}
		for _, w := range wrongTokens(40, admin) {
			got[bearer(t, http.MethodGet, u.srv.URL+"/api/v1/me", w, "").StatusCode]++
		}
		// 10 wrong secrets for the admin token's id: 5 answered 401, then 429.
		if got[http.StatusUnauthorized] != 35 || got[http.StatusTooManyRequests] != 5 {
			t.Errorf("wrong tokens answered %v, want 35×401 and 5×429", got)
		}
		resp := bearer(t, http.MethodGet, u.srv.URL+"/api/v1/me", admin[:21]+testToken("x")[21:], "")
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("another wrong secret for the admin id = %d, want 429", resp.StatusCode)
		}
		checkRetryAfter(t, resp, 60)
		for _, role := range roleNames {
			if resp := bearer(t, http.MethodGet, u.srv.URL+"/api/v1/me", testToken(role), ""); resp.StatusCode != http.StatusOK {
				t.Errorf("valid %s token after the wrong ones = %d", role, resp.StatusCode)
			}
		}
	})
	t.Run("push endpoint", func(t *testing.T) {
		ing, sink := ingestServer(t) // login_attempts 50
		ship := testToken("ship")
		wrong := ship[:21] + testToken("y")[21:]
		for i := 0; i < 50; i++ {
			if resp := bearer(t, http.MethodPost, ing.URL+"/ingest/v1/lines", wrong, ""); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("wrong secret %d = %d", i, resp.StatusCode)
			}
		}
		resp := bearer(t, http.MethodPost, ing.URL+"/ingest/v1/lines", wrong, "")
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("51st wrong secret = %d, want 429", resp.StatusCode)
		}
		checkRetryAfter(t, resp, 60)
		if resp := bearer(t, http.MethodPost, ing.URL+"/ingest/v1/lines", ship, `{"line":"a","node":"n"}`+"\n"); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("right token after the wrong ones = %d", resp.StatusCode)
		}
		if sink.n != 1 {
			t.Fatalf("sink has %d lines, want 1", sink.n)
		}
	})
}

// The proxy header is believed only from a trusted proxy: then each
// client address behind it has its own limits (and is the one audited);
// otherwise the header is ignored and cannot be used to dodge the limit.
func TestTrustedProxyHeader(t *testing.T) {
	st := testdb.New(t)
	behind := newTestUI(t, st, withAuth(func(a *config.Auth) {
		a.ClientIPHeader, a.TrustedProxies = "X-Forwarded-For", "127.0.0.1"
	}))
	for i := 0; i < 5; i++ {
		if resp := formLogin(t, behind.srv.URL, "viewer-user", "wrong", "10.0.0.1"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong %d = %d", i, resp.StatusCode)
		}
	}
	for _, tt := range []struct {
		xff  string
		want int
	}{
		{"10.0.0.1", http.StatusTooManyRequests},
		// The client may prepend anything; the proxy's own entry counts.
		{"10.0.0.2, 10.0.0.1", http.StatusTooManyRequests},
		{"10.0.0.2", http.StatusSeeOther},
	} {
		if resp := formLogin(t, behind.srv.URL, "viewer-user", testPassword, tt.xff); resp.StatusCode != tt.want {
			t.Errorf("behind a trusted proxy, X-Forwarded-For %q = %d, want %d", tt.xff, resp.StatusCode, tt.want)
		}
	}
	var n uint64
	if err := st.QueryRow(context.Background(), "SELECT count() FROM audit_log WHERE action = 'login_failed' AND remote_addr = '10.0.0.1'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("audit log has %d failed logins from 10.0.0.1, want 5", n)
	}

	direct := newTestUI(t, testdb.New(t))
	for i := 0; i < 5; i++ {
		formLogin(t, direct.srv.URL, "viewer-user", "wrong", fmt.Sprint("10.0.1.", i))
	}
	if resp := formLogin(t, direct.srv.URL, "viewer-user", testPassword, "10.0.1.99"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("without trusted proxies a forged X-Forwarded-For dodged the limit: %d", resp.StatusCode)
	}
}

func TestResolveAddr(t *testing.T) {
	a, err := newAuthenticator(config.Auth{ClientIPHeader: "X-Forwarded-For", TrustedProxies: "10.9.0.0/16, 127.0.0.1",
		LoginAttempts: 5, LoginWindow: time.Minute}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	real, err := newAuthenticator(config.Auth{ClientIPHeader: "X-Real-IP", TrustedProxies: "127.0.0.1",
		LoginAttempts: 5, LoginWindow: time.Minute}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	off, _ := newAuthenticator(config.Auth{LoginAttempts: 5, LoginWindow: time.Minute}, time.Now)
	for _, tt := range []struct {
		name   string
		a      *authenticator
		remote string
		hdr    map[string][]string
		want   string
	}{
		{"off", off, "127.0.0.1:5", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "127.0.0.1"},
		{"untrusted peer", a, "192.0.2.7:5", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "192.0.2.7"},
		{"trusted peer", a, "127.0.0.1:5", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "1.2.3.4"},
		{"chain of proxies", a, "127.0.0.1:5", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 1.2.3.4, 10.9.1.1"}}, "1.2.3.4"},
		{"two header lines", a, "127.0.0.1:5", map[string][]string{"X-Forwarded-For": {"6.6.6.6", "1.2.3.4"}}, "1.2.3.4"},
		{"garbage hop", a, "127.0.0.1:5", map[string][]string{"X-Forwarded-For": {"1.2.3.4, junk"}}, "127.0.0.1"},
		{"no header", a, "127.0.0.1:5", nil, "127.0.0.1"},
		{"ipv6 peer", a, "[::1]:5", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "::1"},
		{"x-real-ip", real, "127.0.0.1:5", map[string][]string{"X-Real-Ip": {"1.2.3.4"}}, "1.2.3.4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.resolveAddr(tt.remote, http.Header(tt.hdr)); got != tt.want {
				t.Fatalf("resolveAddr = %q, want %q", got, tt.want)
			}
		})
	}
}

// failRevokeStore is a store on which recording a logout fails (the rest
// works).
type failRevokeStore struct{ Store }

func (failRevokeStore) RevokeSession(context.Context, string, string, time.Time) error {
	return errors.New("injected: clickhouse refused the insert")
}

// A logout that cannot be recorded says so (503) and leaves the session
// valid and its cookie in place, so the user can retry it.
func TestFailedLogoutKeepsTheSession(t *testing.T) {
	st := testdb.New(t)
	u := newTestUI(t, st, func(o *Options) { o.Store = failRevokeStore{testStore(st)} })
	c, csrf, code := u.login(t, "viewer-user", testPassword)
	if code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	resp, err := c.PostForm(u.srv.URL+"/logout", url.Values{"_csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("logout with a failing store = %d, want 503", resp.StatusCode)
	}
	if sc := strings.Join(resp.Header.Values("Set-Cookie"), "\n"); strings.Contains(sc, sessionCookie+"=") {
		t.Errorf("failed logout touched the session cookie: %s", sc)
	}
	if resp, _ := c.Get(u.srv.URL + "/api/v1/me"); resp.StatusCode != http.StatusOK {
		t.Errorf("session after a failed logout = %d, want 200", resp.StatusCode)
	}
}
