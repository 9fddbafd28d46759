package web

import (
	"strings"

	"github.com/gin-gonic/gin"
)

// contentSecurityPolicy allows only kvtrail's own static files: no inline
// script or style, no eval, no plugins, no framing, forms only to itself.
// Log content is rendered as escaped text, and this is the second wall.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every response carries. Pages and API
// answers are never cached: they hold tenant names and evidence.
func securityHeaders() gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: with no-referrer Chrome sends "Origin:
		// null" on form posts, which the CSRF origin check must refuse.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
		if !strings.HasPrefix(c.Request.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-store")
		}
		if c.Request.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		c.Next()
	}
}
