package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/internal/apitoken"
)

// new-token prints a token and a hash line that, pasted into kvtrail.yaml,
// is accepted by the config and verifies the token; an old bcrypt token
// hash is refused with a message naming new-token.
func TestNewTokenHashLineIsAcceptedConfig(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := run(t, dir, nil, "user", "new-token")
	if code != 0 {
		t.Fatalf("new-token exit %d: %s", code, errOut)
	}
	m := regexp.MustCompile(`(?m)^token:\s+(\S+)\ntoken_hash: (".*")$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("new-token output:\n%s", out)
	}
	tok, hashLine := m[1], m[2]
	st, err := apitoken.ParseHash(strings.Trim(hashLine, `"`))
	if err != nil || !st.Verify(tok) {
		t.Fatalf("printed hash %s does not verify the printed token: %v", hashLine, err)
	}
	for _, tt := range []struct {
		name, hash string
		code       int
		want       string
	}{
		{"printed line", hashLine, 0, "token_hash: <secret>"},
		{"old bcrypt hash", `"$2a$12$` + strings.Repeat("a", 53) + `"`, 2, "kvtrail user new-token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := "auth:\n  tokens:\n    - name: shipper\n      role: ingester\n      token_hash: " + tt.hash + "\n"
			if err := os.WriteFile(filepath.Join(dir, "kvtrail.yaml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := run(t, dir, nil, "config", "print")
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Fatalf("config print exit %d (want %d), output lacks %q:\n%s%s", code, tt.code, tt.want, out, errOut)
			}
		})
	}
}
