package web

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// testToken is a fixed well-formed API token per name (id and secret
// derived from the name), so tests can name tokens without storing them.
func testToken(name string) string {
	id := sha256.Sum256([]byte("kvtrail-test-token-id\x00" + name))
	secret := sha256.Sum256([]byte("kvtrail-test-token-secret\x00" + name))
	return "kvt_" + hex.EncodeToString(id[:8]) + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
}
