package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

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
	tokens  []config.Token
	dummy   []byte // a bcrypt hash to compare against for unknown users
	limiter *loginLimiter
	now     func() time.Time

	mu         sync.Mutex
	tokenCache map[[32]byte]tokenEntry // sha256(token) -> verified token
}

type tokenEntry struct {
	name, role string
}

func newAuthenticator(cfg config.Auth, now func() time.Time) (*authenticator, error) {
	key := []byte(cfg.SessionKey.Reveal())
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("kvtrail-no-such-user"), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	a := &authenticator{
		cfg: cfg, key: key, users: map[string]config.User{}, tokens: cfg.Tokens, dummy: dummy, now: now,
		limiter:    newLoginLimiter(cfg.LoginAttempts, cfg.LoginWindow, now),
		tokenCache: map[[32]byte]tokenEntry{},
	}
	for _, u := range cfg.Users {
		a.users[u.Name] = u
	}
	return a, nil
}

// checkPassword verifies a login. Unknown users cost the same bcrypt
// comparison as known ones, so timing does not reveal which names exist.
func (a *authenticator) checkPassword(name, password string) (config.User, bool) {
	u, ok := a.users[name]
	hash := a.dummy
	if ok {
		hash = []byte(u.PasswordHash.Reveal())
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	return u, ok && err == nil
}

// checkToken verifies an API bearer token. A verified token is cached by
// its SHA-256 so bcrypt runs once per token, not once per request.
func (a *authenticator) checkToken(tok string) (tokenEntry, bool) {
	if tok == "" || len(tok) > 256 {
		return tokenEntry{}, false
	}
	sum := sha256.Sum256([]byte(tok))
	a.mu.Lock()
	e, ok := a.tokenCache[sum]
	a.mu.Unlock()
	if ok {
		return e, true
	}
	for _, t := range a.tokens {
		if bcrypt.CompareHashAndPassword([]byte(t.TokenHash.Reveal()), []byte(tok)) == nil {
			e = tokenEntry{name: t.Name, role: t.Role}
			a.mu.Lock()
			a.tokenCache[sum] = e
			a.mu.Unlock()
			return e, true
		}
	}
	return tokenEntry{}, false
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
// still exists with the same password.
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
		csrf: base64.RawURLEncoding.EncodeToString(a.mac("csrf", s.Nonce))}, true
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
		if h := c.GetHeader("Authorization"); h != "" {
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || !s.auth.limiter.allowed(clientAddr(c), "") {
				s.deny(c, http.StatusUnauthorized)
				return
			}
			e, ok := s.auth.checkToken(strings.TrimSpace(tok))
			if !ok {
				s.auth.limiter.fail(clientAddr(c), "")
				s.deny(c, http.StatusUnauthorized)
				return
			}
			c.Set(principalKey, &Principal{Name: e.name, Role: e.role, Via: "token"})
			c.Next()
			return
		}
		if ck, err := c.Cookie(sessionCookie); err == nil {
			if p, ok := s.auth.decodeSession(ck); ok {
				c.Set(principalKey, p)
				c.Next()
				return
			}
		}
		s.deny(c, http.StatusUnauthorized)
	}
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
			s.deny(c, http.StatusForbidden)
			return
		}
		c.Next()
	}
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
		msg := map[int]string{401: "authentication required", 403: "forbidden", 429: "too many attempts"}[status]
		c.AbortWithStatusJSON(status, gin.H{"error": msg})
		return
	}
	if status == http.StatusUnauthorized {
		c.Redirect(http.StatusSeeOther, "/login")
		c.Abort()
		return
	}
	s.renderError(c, status, map[int]string{403: "You do not have permission for this page or action.", 429: "Too many attempts."}[status])
	c.Abort()
}

// clientAddr is the peer address used for rate limiting and the audit log.
// X-Forwarded-For is not trusted (gin's trusted proxies are off).
func clientAddr(c *gin.Context) string { return c.ClientIP() }

// loginLimiter counts failed logins per client address and per user name in
// a fixed window.
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

func (l *loginLimiter) keys(addr, user string) []string {
	k := []string{"a:" + addr}
	if user != "" {
		k = append(k, "u:"+user)
	}
	return k
}

func (l *loginLimiter) allowed(addr, user string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, k := range l.keys(addr, user) {
		if f := l.fails[k]; f != nil && now.Sub(f.start) < l.window && f.n >= l.max {
			return false
		}
	}
	return true
}

func (l *loginLimiter) fail(addr, user string) {
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
	for _, k := range l.keys(addr, user) {
		f := l.fails[k]
		if f == nil || now.Sub(f.start) >= l.window {
			f = &failCount{start: now}
			l.fails[k] = f
		}
		f.n++
	}
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
	addr := clientAddr(c)
	fresh := func(msg string, status int) {
		n := randomToken()
		s.setCookie(c, loginCookie, n, 600)
		s.renderPage(c, status, "login", loginPage{CSRF: s.auth.loginCSRF(n), Error: msg, User: name})
	}
	if !s.auth.limiter.allowed(addr, name) {
		s.audit(c, &Principal{Name: name, Role: ""}, "login_refused", map[string]any{"reason": errLoginLimited.Error()}, 0, http.StatusTooManyRequests)
		fresh("Too many failed logins. Wait a minute and try again.", http.StatusTooManyRequests)
		return
	}
	u, ok := s.auth.checkPassword(name, c.PostForm("password"))
	if !ok {
		s.auth.limiter.fail(addr, name)
		s.audit(c, &Principal{Name: name}, "login_failed", nil, 0, http.StatusUnauthorized)
		fresh("Wrong user name or password.", http.StatusUnauthorized)
		return
	}
	s.setCookie(c, loginCookie, "", -1)
	s.setCookie(c, sessionCookie, s.auth.encodeSession(u), int(s.auth.cfg.SessionTTL.Seconds()))
	s.audit(c, &Principal{Name: u.Name, Role: u.Role}, "login", nil, 1, http.StatusSeeOther)
	c.Redirect(http.StatusSeeOther, "/")
}

func (s *server) logout(c *gin.Context) {
	s.audit(c, principal(c), "logout", nil, 0, http.StatusSeeOther)
	s.setCookie(c, sessionCookie, "", -1)
	c.Redirect(http.StatusSeeOther, "/login")
}

func (s *server) me(c *gin.Context) {
	p := principal(c)
	c.JSON(http.StatusOK, gin.H{"name": p.Name, "role": p.Role, "via": p.Via, "capabilities": p.Capabilities(), "csrf_token": p.csrf})
}
