package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/kvtrail/kvtrail/internal/apitoken"
)

// Roles known to the UI and API, from least to most privileged, plus
// "ingester", the role of log shippers' tokens (it may only push). What each
// may do is decided in web/ (docs/ui.md); config only checks the names.
var Roles = []string{"viewer", "responder", "compliance", "admin", "ingester"}

// Auth configures the users, API tokens and sessions of the UI and API
// (owned by web/). Secrets are never stored in clear: passwords are bcrypt
// hashes made with `kvtrail user hash-password`, API tokens SHA-256 hashes
// made with `kvtrail user new-token` (internal/apitoken: a token is 256
// random bits with an id, so one fast hash is checked per request).
type Auth struct {
	// Users who log in to the UI with a name and password.
	Users []User `mapstructure:"users" yaml:"users"`
	// Tokens authenticate API clients (Authorization: Bearer <token>).
	Tokens []Token `mapstructure:"tokens" yaml:"tokens"`
	// SessionKey signs session cookies and CSRF tokens (HMAC-SHA256). At
	// least 32 characters. Empty: a random key per process, so sessions end
	// when kvtrail restarts and do not work across several instances.
	SessionKey Secret `mapstructure:"session_key" yaml:"session_key"`
	// SessionTTL is how long a login lasts.
	SessionTTL time.Duration `mapstructure:"session_ttl" yaml:"session_ttl"`
	// SecureCookie is auto (Secure when the request came over TLS or through
	// a proxy that says so), always or never.
	SecureCookie string `mapstructure:"secure_cookie" yaml:"secure_cookie"`
	// LoginAttempts is how many failed logins per (client address, user
	// name), and failed tokens per (client address, token id), are allowed
	// within LoginWindow before that pair is refused with 429.
	LoginAttempts int           `mapstructure:"login_attempts" yaml:"login_attempts"`
	LoginWindow   time.Duration `mapstructure:"login_window" yaml:"login_window"`
	// ClientIPHeader names the header a reverse proxy puts the client
	// address in (X-Forwarded-For or X-Real-IP). It is read only from peers
	// listed in TrustedProxies; empty (the default) uses the peer address.
	ClientIPHeader string `mapstructure:"client_ip_header" yaml:"client_ip_header"`
	// TrustedProxies is a comma-separated list of proxy addresses or CIDRs
	// whose ClientIPHeader is believed.
	TrustedProxies string `mapstructure:"trusted_proxies" yaml:"trusted_proxies"`
}

// Proxies parses TrustedProxies (validate has checked it).
func (c Auth) Proxies() ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, p := range strings.Split(c.TrustedProxies, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			ip := net.ParseIP(p)
			if ip == nil {
				return nil, fmt.Errorf("%q is not an IP address or CIDR", p)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address or CIDR", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// User is one login of the UI.
type User struct {
	Name         string `mapstructure:"name" yaml:"name"`
	Role         string `mapstructure:"role" yaml:"role"`
	PasswordHash Secret `mapstructure:"password_hash" yaml:"password_hash"`
}

// Token is one API token.
type Token struct {
	Name      string `mapstructure:"name" yaml:"name"`
	Role      string `mapstructure:"role" yaml:"role"`
	TokenHash Secret `mapstructure:"token_hash" yaml:"token_hash"`
}

func defaultAuth() Auth {
	return Auth{
		SessionTTL:    12 * time.Hour,
		SecureCookie:  "auto",
		LoginAttempts: 5,
		LoginWindow:   time.Minute,
	}
}

// validate returns one error per bad value, each naming its key.
func (c Auth) validate() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	names := map[string]bool{}
	for i, u := range c.Users {
		key := fmt.Sprintf("auth.users[%d]", i)
		if !validPrincipal(u.Name) {
			bad(key+".name", "%q must be 1-64 letters, digits, '.', '_', '-' or '@'", u.Name)
		} else if names[u.Name] {
			bad(key+".name", "%q is listed twice", u.Name)
		}
		names[u.Name] = true
		if !validRole(u.Role) {
			bad(key+".role", "%q must be one of %s", u.Role, strings.Join(Roles, ", "))
		}
		if !bcryptHash(u.PasswordHash.Reveal()) {
			bad(key+".password_hash", "must be a bcrypt hash ($2a$/$2b$/$2y$, made by `kvtrail user hash-password`)")
		}
	}
	tokens := map[string]bool{}
	ids := map[string]string{}
	for i, t := range c.Tokens {
		key := fmt.Sprintf("auth.tokens[%d]", i)
		if !validPrincipal(t.Name) {
			bad(key+".name", "%q must be 1-64 letters, digits, '.', '_', '-' or '@'", t.Name)
		} else if tokens[t.Name] || names[t.Name] {
			bad(key+".name", "%q is already a user or token name", t.Name)
		}
		tokens[t.Name] = true
		if !validRole(t.Role) {
			bad(key+".role", "%q must be one of %s", t.Role, strings.Join(Roles, ", "))
		}
		if st, err := apitoken.ParseHash(t.TokenHash.Reveal()); errors.Is(err, apitoken.ErrLegacyHash) {
			bad(key+".token_hash", "is %v", err)
		} else if err != nil {
			bad(key+".token_hash", "%v", err)
		} else if prev, dup := ids[st.ID]; dup {
			bad(key+".token_hash", "has the same token id as %s", prev)
		} else {
			ids[st.ID] = t.Name
		}
	}
	switch c.ClientIPHeader {
	case "", "X-Forwarded-For", "X-Real-IP":
	default:
		bad("auth.client_ip_header", "must be empty, X-Forwarded-For or X-Real-IP, got %q", c.ClientIPHeader)
	}
	if _, err := c.Proxies(); err != nil {
		bad("auth.trusted_proxies", "%v", err)
	}
	if c.ClientIPHeader != "" && strings.TrimSpace(c.TrustedProxies) == "" {
		bad("auth.trusted_proxies", "must list the proxies whose %s is believed", c.ClientIPHeader)
	}
	if k := c.SessionKey.Reveal(); k != "" && len(k) < 32 {
		bad("auth.session_key", "must be at least 32 characters, got %d", len(k))
	}
	if c.SessionTTL < time.Minute || c.SessionTTL > 30*24*time.Hour {
		bad("auth.session_ttl", "must be between 1m and 720h, got %s", c.SessionTTL)
	}
	switch c.SecureCookie {
	case "auto", "always", "never":
	default:
		bad("auth.secure_cookie", "must be auto, always or never, got %q", c.SecureCookie)
	}
	if c.LoginAttempts < 1 || c.LoginAttempts > 1000 {
		bad("auth.login_attempts", "must be between 1 and 1000, got %d", c.LoginAttempts)
	}
	if c.LoginWindow < time.Second || c.LoginWindow > 24*time.Hour {
		bad("auth.login_window", "must be between 1s and 24h, got %s", c.LoginWindow)
	}
	return errs
}

func validRole(r string) bool {
	for _, x := range Roles {
		if r == x {
			return true
		}
	}
	return false
}

func validPrincipal(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '.', r == '_', r == '-', r == '@':
		default:
			return false
		}
	}
	return true
}

// bcryptHash checks the shape of a bcrypt hash ($2b$10$ + 53 characters).
func bcryptHash(h string) bool {
	if len(h) != 60 || h[0] != '$' || h[3] != '$' || h[6] != '$' {
		return false
	}
	switch h[1:3] {
	case "2a", "2b", "2y":
		return true
	}
	return false
}
