package config

import (
	"fmt"
	"strings"
	"time"
)

// Roles known to the UI and API, from least to most privileged, plus
// "ingester", the role of log shippers' tokens (it may only push). What each
// may do is decided in web/ (docs/ui.md); config only checks the names.
var Roles = []string{"viewer", "responder", "compliance", "admin", "ingester"}

// Auth configures the users, API tokens and sessions of the UI and API
// (owned by web/). Secrets are never stored in clear: passwords and tokens
// are bcrypt hashes made with `kvtrail user hash-password` / `new-token`.
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
	// LoginAttempts is how many failed logins per client address and per
	// user name are allowed within LoginWindow before logins are refused.
	LoginAttempts int           `mapstructure:"login_attempts" yaml:"login_attempts"`
	LoginWindow   time.Duration `mapstructure:"login_window" yaml:"login_window"`
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
		if !bcryptHash(t.TokenHash.Reveal()) {
			bad(key+".token_hash", "must be a bcrypt hash (made by `kvtrail user new-token`)")
		}
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
