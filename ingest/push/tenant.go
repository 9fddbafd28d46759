package push

import (
	"fmt"
	"net/http"
)

// TenantHeader carries the tenant, as in Loki.
const TenantHeader = "X-Scope-OrgID"

const maxTenantLen = 150 // Loki's limit

// tenant returns the validated tenant of r, "" if the header is absent.
// The character set is Loki's, so a tenant accepted here is accepted by
// Loki tooling too, and it cannot smuggle separators into storage keys.
func tenant(r *http.Request) (string, error) {
	t := r.Header.Get(TenantHeader)
	if t == "" {
		return "", nil
	}
	if len(t) > maxTenantLen {
		return "", fmt.Errorf("%w: %s is %d bytes, limit is %d", ErrBadRequest, TenantHeader, len(t), maxTenantLen)
	}
	if t == "." || t == ".." {
		return "", fmt.Errorf("%w: %s must not be %q", ErrBadRequest, TenantHeader, t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '!' || c == '-' || c == '_' || c == '.' || c == '*' || c == '\'' || c == '(' || c == ')'
		if !ok {
			return "", fmt.Errorf("%w: %s has a disallowed character at offset %d", ErrBadRequest, TenantHeader, i)
		}
	}
	return t, nil
}
