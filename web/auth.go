package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

	"github.com/kvtrail/kvtrail/internal/apitoken"
	"github.com/kvtrail/kvtrail/internal/config"
)

// Cookie and header names.
const (
	sessionCookie = "kvtrail_session"
	loginCookie   = "kvtrail_login"
	csrfField     = "_csrf"
	csrfHeader    = "X-CSRF-Token"
)

// perm is one thing a role may do. Every route names the permission it
// needs; there is no route without one except /login and the operational
// endpoints.
type perm int

const (
	permRead      perm = iota // overview, search, requests, findings, cases, affected lists
	permCaseWrite             // create and edit cases, legal hold, analyzer runs
	permExport                // notification-list exports: create, read, download
	permAudit                 // read the audit log
	permIngest                // push log lines (Loki push, NDJSON)
)

var rolePerms = map[string]map[perm]bool{
	"viewer":     {permRead: true},
	"responder":  {permRead: true, permCaseWrite: true},
	"compliance": {permRead: true, permCaseWrite: true, permExport: true},
	"admin":      {permRead: true, permCaseWrite: true, permExport: true, permAudit: true, permIngest: true},
	"ingester":   {permIngest: true},
}

// Principal is who is making a request.
type Principal struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Via is "session" (UI cookie) or "token" (API bearer token).
	Via string `json:"via"`
	// csrf is the session's CSRF token (empty for token auth).
	csrf string
	// sid and expires identify a session for logout (session auth only).
	sid     string
	expires int64
}

// Can reports whether the principal's role grants p.
func (p *Principal) Can(q perm) bool { return p != nil && rolePerms[p.Role][q] }

// Capabilities is what the UI shows and hides for a principal.
func (p *Principal) Capabilities() map[string]bool {
	return map[string]bool{
		"read": p.Can(permRead), "case_write": p.Can(permCaseWrite),
		"export": p.Can(permExport), "audit": p.Can(permAudit),
	}
}

// authenticator checks passwords, tokens and session cookies.
type authenticator struct {
	cfg     config.Auth
	key     []byte
	users   map[string]config.User
	tokens  map[string]storedToken // by token id
	dummy   []byte                 // a bcrypt hash to compare against for unknown users
	limiter *loginLimiter
	// checks bounds the bcrypt comparisons running at once: each costs
	// about 0.25 s of CPU at the cost `kvtrail user hash-password` uses, so
	// a flood of logins must not take every core.
	checks  chan struct{}
	proxies []*net.IPNet
	// sessions records logouts in ClickHouse so that every instance behind
	// a load balancer refuses a logged-out cookie. nil (the ingest guard):
	// revocations are known to this process only.
	sessions sessionStore
	now      func() time.Time

	mu      sync.Mutex
	revoked map[string]int64 // session id -> cookie expiry (unix s): revocations already seen
}

type storedToken struct {
	name, role string
	hash       apitoken.Stored
}

type tokenEntry struct {
	name, role string
}

// sessionStore keeps session revocations (ClickHouse: store_sessions.go).
type sessionStore interface {
	RevokeSession(ctx context.Context, id, user string, expires time.Time) error
	SessionRevoked(ctx context.Context, id string) (bool, error)
}

// checkWait is how long a login waits for a free bcrypt slot before it is
// answered 503: long enough to ride out a burst of real logins, short
// enough that a flood gets its refusals at once instead of queueing.
const checkWait = 100 * time.Millisecond

// errBusy is returned when every bcrypt slot stayed taken for checkWait.
var errBusy = errors.New("too many credential checks in progress")

func newAuthenticator(cfg config.Auth, now func() time.Time) (*authenticator, error) {
	key := []byte(cfg.SessionKey.Reveal())
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	// The dummy hash costs what the most expensive real one does, so an
	// unknown name takes as long as a known one with a wrong password.
	cost := bcrypt.MinCost
	for _, u := range cfg.Users {
		if c, err := bcrypt.Cost([]byte(u.PasswordHash.Reveal())); err == nil && c > cost {
			cost = c
		}
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("kvtrail-no-such-user"), cost)
	if err != nil {
		return nil, err
	}
	proxies, err := cfg.Proxies()
	if err != nil {
		return nil, fmt.Errorf("auth.trusted_proxies: %w", err)
	}
	a := &authenticator{
		cfg: cfg, key: key, users: map[string]config.User{}, tokens: map[string]storedToken{}, dummy: dummy, now: now,
		limiter: newLoginLimiter(cfg.LoginAttempts, cfg.LoginWindow, now),
		checks:  make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		proxies: proxies,
		revoked: map[string]int64{},
	}
	for _, u := range cfg.Users {
		a.users[u.Name] = u
	}
	for i, t := range cfg.Tokens {
		st, err := apitoken.ParseHash(t.TokenHash.Reveal())
		if err != nil {
			return nil, fmt.Errorf("auth.tokens[%d].token_hash: %w", i, err)
		}
		if _, dup := a.tokens[st.ID]; dup {
			return nil, fmt.Errorf("auth.tokens[%d].token_hash: token id %s is listed twice", i, st.ID)
		}
		a.tokens[st.ID] = storedToken{name: t.Name, role: t.Role, hash: st}
	}
	return a, nil
}

// checkPassword verifies a login. Unknown users cost the same bcrypt
// comparison as known ones, so timing does not reveal which names exist.
// It returns errBusy, without comparing, when too many checks are running.
func (a *authenticator) checkPassword(name, password string) (config.User, bool, error) {
	select {
	case a.checks <- struct{}{}:
	default:
		t := time.NewTimer(checkWait)
		select {
		case a.checks <- struct{}{}:
			t.Stop()
		case <-t.C:
			return config.User{}, false, errBusy
		}
	}
	defer func() { <-a.checks }()
	u, ok := a.users[name]
	hash := a.dummy
	if ok {
		hash = []byte(u.PasswordHash.Reveal())
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	return u, ok && err == nil, nil
}

// checkToken verifies an API token from addr. The token's id selects the
// one hash it can match: a malformed token or an unknown id is refused
// without hashing, a known id costs one SHA-256. A right token is always
// accepted (its 256-bit secret cannot be guessed, so there is nothing to
// slow down and no reason to let wrong attempts lock it out); wrong ones
// for a known id are counted per (address, token id) and, past the limit,
// answered 429 instead of 401.
func (a *authenticator) checkToken(addr, tok string) (tokenEntry, time.Duration, int) {
	id, ok := apitoken.ID(tok)
	if !ok {
		return tokenEntry{}, 0, http.StatusUnauthorized
	}
	t, ok := a.tokens[id]
	if !ok {
		return tokenEntry{}, 0, http.StatusUnauthorized
	}
	if t.hash.Verify(tok) {
		return tokenEntry{name: t.name, role: t.role}, 0, 0
	}
	key := "t\x00" + addr + "\x00" + id
	if retry, ok := a.limiter.check(key); !ok {
		return tokenEntry{}, retry, http.StatusTooManyRequests
	}
	a.limiter.fail(key)
	return tokenEntry{}, 0, http.StatusUnauthorized
}

// loginKey is the limiter key of a login: one count per (address, name),
// so failures for one account never lock out another from a shared
// address (a proxy, a NAT).
func loginKey(addr, name string) string { return "l\x00" + addr + "\x00" + name }

// sessionID names a session in the revocation table: a hash of the
// cookie's nonce, so the table holds nothing that forges a CSRF token.
func sessionID(nonce string) string {
	s := sha256.Sum256([]byte("kvtrail-session\x00" + nonce))
	return hex.EncodeToString(s[:16])
}

// revoke ends a session on every instance: the revocation is written to
// ClickHouse first and remembered locally only once it is stored, so a
// failed logout leaves the session as it was and the user can retry.
func (a *authenticator) revoke(ctx context.Context, p *Principal) error {
	if a.sessions != nil {
		if err := a.sessions.RevokeSession(ctx, p.sid, p.Name, time.Unix(p.expires, 0)); err != nil {
			return err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.revoked) > 10_000 {
		now := a.now().Unix()
		for k, exp := range a.revoked {
			if exp <= now {
				delete(a.revoked, k)
			}
		}
	}
	a.revoked[p.sid] = p.expires
	return nil
}

// isRevoked asks ClickHouse on every request (a primary-key read of a
// small table), so a logout on one instance holds on all of them at once.
// Only a positive answer is cached: it never changes.
func (a *authenticator) isRevoked(ctx context.Context, p *Principal) (bool, error) {
	a.mu.Lock()
	_, seen := a.revoked[p.sid]
	a.mu.Unlock()
	if seen || a.sessions == nil {
		return seen, nil
	}
	r, err := a.sessions.SessionRevoked(ctx, p.sid)
	if err != nil {
		return false, fmt.Errorf("check session revocation: %w", err)
	}
	if r {
		a.mu.Lock()
		a.revoked[p.sid] = p.expires
		a.mu.Unlock()
	}
	return r, nil
}

// session is the signed content of the session cookie. The role is not in
// it: it is read from the config on every request, so a changed role or a
// removed user takes effect at once. pw binds the session to the password
// hash, so changing a password ends every session of that user.
type session struct {
	User    string `json:"u"`
	Expires int64  `json:"e"`
	Nonce   string `json:"n"`
	PW      string `json:"p"`
}

func (a *authenticator) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, a.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

func pwTag(u config.User) string {
	s := sha256.Sum256([]byte(u.PasswordHash.Reveal()))
	return hex.EncodeToString(s[:8])
}

func randomToken() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (a *authenticator) encodeSession(u config.User) string {
	s := session{User: u.Name, Expires: a.now().Add(a.cfg.SessionTTL).Unix(), Nonce: randomToken(), PW: pwTag(u)}
	b, _ := json.Marshal(s)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(a.mac("session", payload))
}

// decodeSession checks the cookie's signature, expiry and that its user
// still exists with the same password. Whether it was logged out is
// isRevoked's question (it needs ClickHouse; this needs nothing).
func (a *authenticator) decodeSession(v string) (*Principal, bool) {
	payload, sig, ok := strings.Cut(v, ".")
	if !ok || len(v) > 4096 {
		return nil, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.mac("session", payload)) {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, false
	}
	var s session
	if json.Unmarshal(b, &s) != nil || a.now().Unix() >= s.Expires {
		return nil, false
	}
	u, ok := a.users[s.User]
	if !ok || subtle.ConstantTimeCompare([]byte(pwTag(u)), []byte(s.PW)) != 1 {
		return nil, false
	}
	return &Principal{Name: u.Name, Role: u.Role, Via: "session",
		csrf: base64.RawURLEncoding.EncodeToString(a.mac("csrf", s.Nonce)), sid: sessionID(s.Nonce), expires: s.Expires}, true
}

// loginCSRF is the token the login form carries, bound to the pre-session
// cookie (double submit, signed so the cookie alone cannot be forged).
func (a *authenticator) loginCSRF(nonce string) string {
	return base64.RawURLEncoding.EncodeToString(a.mac("login", nonce))
}

func (s *server) secureCookie(c *gin.Context) bool {
	switch s.auth.cfg.SecureCookie {
	case "always":
		return true
	case "never":
		return false
	}
	return c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https")
}

func (s *server) setCookie(c *gin.Context, name, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secureCookie(c), SameSite: http.SameSiteStrictMode,
	})
}

// principalKey is where authenticate stores the Principal in the gin context.
const principalKey = "kvtrail.principal"

func principal(c *gin.Context) *Principal {
	p, _ := c.Get(principalKey)
	pr, _ := p.(*Principal)
	return pr
}

func isAPI(c *gin.Context) bool { return strings.HasPrefix(c.Request.URL.Path, "/api/") }

// authenticate finds the principal from a bearer token or the session
// cookie. Unauthenticated API calls get 401; pages redirect to /login.
func (s *server) authenticate() gin.HandlerFunc {
	return func(c *gin.Context) {
		addr := s.auth.clientAddr(c)
		if h := c.GetHeader("Authorization"); h != "" {
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok {
				s.deny(c, http.StatusUnauthorized)
				return
			}
			e, retry, status := s.auth.checkToken(addr, strings.TrimSpace(tok))
			if status != 0 {
				setRetryAfter(c, retry)
				s.deny(c, status)
				return
			}
			c.Set(principalKey, &Principal{Name: e.name, Role: e.role, Via: "token"})
			c.Next()
			return
		}
		if ck, err := c.Cookie(sessionCookie); err == nil {
			if p, ok := s.auth.decodeSession(ck); ok {
				revoked, err := s.auth.isRevoked(c.Request.Context(), p)
				if err != nil {
					// Fail closed: a session that may have been logged out
					// is not honoured while ClickHouse cannot say.
					s.log.Error("session check failed", slog.Any("err", err))
					setRetryAfter(c, 5*time.Second)
					s.deny(c, http.StatusServiceUnavailable)
					return
				}
				if !revoked {
					c.Set(principalKey, p)
					c.Next()
					return
				}
			}
		}
		s.deny(c, http.StatusUnauthorized)
	}
}

// setRetryAfter tells a refused client when to try again (whole seconds,
// at least 1).
func setRetryAfter(c *gin.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	c.Header("Retry-After", strconv.Itoa(int(max(1, (d+time.Second-1)/time.Second))))
}

// csrf protects state-changing requests made with a session cookie: the
// form field or X-CSRF-Token header must carry the session's token, and a
// cross-origin Origin header is refused. Bearer-token requests carry no
// ambient credential and need no CSRF token.
func (s *server) csrf() gin.HandlerFunc {
	return func(c *gin.Context) {
		switch c.Request.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			c.Next()
			return
		}
		p := principal(c)
		if p == nil || p.Via == "token" {
			c.Next()
			return
		}
		if !sameOrigin(c) {
			s.deny(c, http.StatusForbidden)
			return
		}
		got := c.GetHeader(csrfHeader)
		if got == "" {
			got = c.PostForm(csrfField)
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(p.csrf)) != 1 || got == "" {
			s.formExpired(c)
			return
		}
		c.Next()
	}
}

// formExpired answers a same-origin form whose CSRF token is missing or
// belongs to an earlier session (the user logged in again in another tab,
// or the page was open across a restart without a session key). It is not
// a permission problem, so it does not say so: it says the form expired
// and links to a fresh copy of the page the form was on.
func (s *server) formExpired(c *gin.Context) {
	if isAPI(c) {
		c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": "the CSRF token is missing or stale: send X-CSRF-Token with the csrf_token of GET /api/v1/me"})
		return
	}
	s.renderTitled(c, http.StatusForbidden, "error", "Form expired", errorPage{Status: http.StatusForbidden,
		Message: "This form has expired: it was opened in an earlier sign-in (or arrived without its security token). Nothing was changed. Reload the page and submit it again.",
		Reload:  reloadTarget(c)}, 0)
	c.Abort()
}

// reloadTarget is the page a rejected form came from: the Referer when it
// is on this site (Referrer-Policy same-origin sends it only then),
// otherwise the page the form's action belongs to (/cases/x/hold → /cases/x).
func reloadTarget(c *gin.Context) string {
	if ref, err := url.Parse(c.GetHeader("Referer")); err == nil && ref.Host == c.Request.Host && ref.Path != "" &&
		strings.HasPrefix(ref.Path, "/") && !strings.HasPrefix(ref.Path, "//") {
		u := url.URL{Path: ref.Path, RawQuery: ref.RawQuery}
		return u.String()
	}
	p := c.Request.URL.Path
	for _, action := range []string{"/hold", "/release", "/analyze", "/exports"} {
		if strings.HasPrefix(p, "/cases/") && strings.HasSuffix(p, action) {
			return strings.TrimSuffix(p, action)
		}
	}
	switch {
	case p == "/logout":
		return "/"
	case strings.HasPrefix(p, "/cases"):
		return p
	}
	return "/"
}

// sameOrigin refuses a request whose Origin (sent by browsers on POST)
// names another host.
func sameOrigin(c *gin.Context) bool {
	o := c.GetHeader("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	_, host, ok := strings.Cut(o, "://")
	return ok && host == c.Request.Host
}

// require allows the route only to roles granting q.
func (s *server) require(q perm) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !principal(c).Can(q) {
			s.deny(c, http.StatusForbidden)
			return
		}
		c.Next()
	}
}

func (s *server) deny(c *gin.Context, status int) {
	if isAPI(c) {
		msg := map[int]string{401: "authentication required", 403: "forbidden", 429: "too many attempts",
			503: "credential checks are unavailable, retry later"}[status]
		c.AbortWithStatusJSON(status, gin.H{"error": msg})
		return
	}
	if status == http.StatusUnauthorized {
		c.Redirect(http.StatusSeeOther, "/login")
		c.Abort()
		return
	}
	s.renderError(c, status, map[int]string{403: "You do not have permission for this page or action.", 429: "Too many attempts.",
		503: "Sign-in cannot be checked right now. Try again in a few seconds."}[status])
	c.Abort()
}

// clientAddrKey is where the authenticator stores the client address it
// worked out, so the audit log records the same address the limiter used.
const clientAddrKey = "kvtrail.client_addr"

// clientAddr is the client address used for rate limiting and the audit
// log: the one the authenticator worked out, else the peer address (gin's
// trusted proxies are off, so X-Forwarded-For is not read).
func clientAddr(c *gin.Context) string {
	if v, ok := c.Get(clientAddrKey); ok {
		return v.(string)
	}
	return c.ClientIP()
}

// clientAddr works out the client's address: the peer, or, when the peer
// is one of auth.trusted_proxies, what it wrote in auth.client_ip_header.
// In X-Forwarded-For every proxy appends the address it saw, so the client
// is the right-most entry that is not itself a trusted proxy; entries left
// of it are whatever the client chose to send and are ignored.
func (a *authenticator) clientAddr(c *gin.Context) string {
	addr := a.resolveAddr(c.Request.RemoteAddr, c.Request.Header)
	c.Set(clientAddrKey, addr)
	return addr
}

func (a *authenticator) resolveAddr(remote string, h http.Header) string {
	host, _, err := net.SplitHostPort(strings.TrimSpace(remote))
	if err != nil {
		host = strings.TrimSpace(remote)
	}
	peer := net.ParseIP(host)
	if peer == nil {
		return host
	}
	if a.cfg.ClientIPHeader == "" || !a.trusted(peer) {
		return peer.String()
	}
	var hops []string
	for _, v := range h.Values(a.cfg.ClientIPHeader) {
		hops = append(hops, strings.Split(v, ",")...)
	}
	if a.cfg.ClientIPHeader != "X-Forwarded-For" && len(hops) > 0 {
		hops = hops[len(hops)-1:]
	}
	for i := len(hops) - 1; i >= 0; i-- {
		ip := net.ParseIP(strings.TrimSpace(hops[i]))
		if ip == nil {
			// A hop a trusted proxy would not write: stop believing the
			// header here rather than guess.
			break
		}
		if !a.trusted(ip) || i == 0 {
			return ip.String()
		}
	}
	return peer.String()
}

func (a *authenticator) trusted(ip net.IP) bool {
	for _, n := range a.proxies {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// loginLimiter counts failures per key (an address with a user name or a
// token id) in a fixed window.
type loginLimiter struct {
	max    int
	window time.Duration
	now    func() time.Time
	mu     sync.Mutex
	fails  map[string]*failCount
}

type failCount struct {
	n     int
	start time.Time
}

func newLoginLimiter(max int, window time.Duration, now func() time.Time) *loginLimiter {
	return &loginLimiter{max: max, window: window, now: now, fails: map[string]*failCount{}}
}

// check reports whether key may try again, and if not, after how long.
func (l *loginLimiter) check(key string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if f := l.fails[key]; f != nil && now.Sub(f.start) < l.window && f.n >= l.max {
		return f.start.Add(l.window).Sub(now), false
	}
	return 0, true
}

func (l *loginLimiter) fail(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.fails) > 100_000 { // bound memory under a spray of addresses
		for k, f := range l.fails {
			if now.Sub(f.start) >= l.window {
				delete(l.fails, k)
			}
		}
	}
	f := l.fails[key]
	if f == nil || now.Sub(f.start) >= l.window {
		f = &failCount{start: now}
		l.fails[key] = f
	}
	f.n++
}

// errLoginLimited is returned by login when the limiter refuses.
var errLoginLimited = errors.New("too many failed logins")

// --- login pages ---

type loginPage struct {
	CSRF  string
	Error string
	User  string
}

func (s *server) loginForm(c *gin.Context) {
	nonce := randomToken()
	s.setCookie(c, loginCookie, nonce, 600)
	s.renderPage(c, http.StatusOK, "login", loginPage{CSRF: s.auth.loginCSRF(nonce)})
}

func (s *server) loginSubmit(c *gin.Context) {
	name := c.PostForm("username")
	if len(name) > 64 {
		name = name[:64]
	}
	nonce, _ := c.Cookie(loginCookie)
	if nonce == "" || !sameOrigin(c) || subtle.ConstantTimeCompare([]byte(c.PostForm(csrfField)), []byte(s.auth.loginCSRF(nonce))) != 1 {
		s.renderError(c, http.StatusForbidden, "The login form expired. Reload the page and try again.")
		return
	}
	addr := s.auth.clientAddr(c)
	fresh := func(msg string, status int) {
		n := randomToken()
		s.setCookie(c, loginCookie, n, 600)
		s.renderPage(c, status, "login", loginPage{CSRF: s.auth.loginCSRF(n), Error: msg, User: name})
	}
	key := loginKey(addr, name)
	if retry, ok := s.auth.limiter.check(key); !ok {
		s.audit(c, &Principal{Name: name, Role: ""}, "login_refused", map[string]any{"reason": errLoginLimited.Error()}, 0, http.StatusTooManyRequests)
		setRetryAfter(c, retry)
		fresh("Too many failed logins for this user from your address. Wait a minute and try again.", http.StatusTooManyRequests)
		return
	}
	u, ok, err := s.auth.checkPassword(name, c.PostForm("password"))
	if err != nil {
		setRetryAfter(c, time.Second)
		fresh("Too many sign-ins are being checked right now. Try again in a second.", http.StatusServiceUnavailable)
		return
	}
	if !ok {
		s.auth.limiter.fail(key)
		s.audit(c, &Principal{Name: name}, "login_failed", nil, 0, http.StatusUnauthorized)
		fresh("Wrong user name or password.", http.StatusUnauthorized)
		return
	}
	s.setCookie(c, loginCookie, "", -1)
	s.setCookie(c, sessionCookie, s.auth.encodeSession(u), int(s.auth.cfg.SessionTTL.Seconds()))
	s.audit(c, &Principal{Name: u.Name, Role: u.Role}, "login", nil, 1, http.StatusSeeOther)
	c.Redirect(http.StatusSeeOther, "/")
}

// logout ends the session on every instance (the revocation is stored in
// ClickHouse) and removes the cookie. If the revocation cannot be stored
// the session stays valid and the cookie stays, so the user sees the
// failure and can retry instead of believing they are logged out.
func (s *server) logout(c *gin.Context) {
	p := principal(c)
	if p != nil && p.Via == "session" {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 10*time.Second)
		defer cancel()
		if err := s.auth.revoke(ctx, p); err != nil {
			s.log.Error("logout: revoke session", slog.Any("err", err))
			s.renderError(c, http.StatusServiceUnavailable, "Logout could not be recorded, so the session is still valid. Try again.")
			return
		}
	}
	s.audit(c, p, "logout", nil, 0, http.StatusSeeOther)
	s.setCookie(c, sessionCookie, "", -1)
	c.Redirect(http.StatusSeeOther, "/login")
}

func (s *server) me(c *gin.Context) {
	p := principal(c)
	c.JSON(http.StatusOK, gin.H{"name": p.Name, "role": p.Role, "via": p.Via, "capabilities": p.Capabilities(), "csrf_token": p.csrf})
}
