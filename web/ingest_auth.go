package web

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kvtrail/kvtrail/internal/config"
)

// IngestAuth guards the push endpoints: every push must carry an API token
// whose role may push ("ingester" or "admin"), as a bearer token or as the
// password of HTTP basic auth (what promtail, Alloy, Vector and Fluent Bit
// can send). A token is checked with one SHA-256 at most (its id selects
// the hash), wrong tokens for a known id are limited per (address, token
// id) like logins, and failures never echo the request. Pushed lines
// become forensic evidence, so an anonymous push would let anyone plant it.
func IngestAuth(cfg config.Auth) (gin.HandlerFunc, error) {
	// Pushes carry tokens only: without the users no dummy bcrypt hash is
	// made, and no password is ever checked here.
	cfg.Users = nil
	a, err := newAuthenticator(cfg, time.Now)
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		tok := ""
		if h := c.GetHeader("Authorization"); h != "" {
			if b, ok := strings.CutPrefix(h, "Bearer "); ok {
				tok = strings.TrimSpace(b)
			} else if b, ok := strings.CutPrefix(h, "Basic "); ok {
				if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b)); err == nil {
					if _, pw, ok := strings.Cut(string(raw), ":"); ok {
						tok = pw
					}
				}
			}
		}
		addr := a.clientAddr(c)
		e, retry, status := a.checkToken(addr, tok)
		switch status {
		case 0:
		case http.StatusTooManyRequests:
			setRetryAfter(c, retry)
			c.AbortWithStatusJSON(http.StatusTooManyRequests, gin.H{"error": "too many failed attempts for this token"})
			return
		default:
			c.Header("WWW-Authenticate", `Bearer realm="kvtrail ingest"`)
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "an ingester or admin API token is required"})
			return
		}
		p := &Principal{Name: e.name, Role: e.role, Via: "token"}
		if !p.Can(permIngest) {
			c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": "this token may not push"})
			return
		}
		c.Set(principalKey, p)
		c.Next()
	}, nil
}
