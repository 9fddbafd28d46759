// Package apitoken is the format of kvtrail's API tokens and of the hashes
// the config stores for them.
//
// A token is "kvt_<id>_<secret>": id is 16 lowercase hex digits that name
// the token, secret is 32 random bytes in unpadded base64url. The config
// stores "sha256$<id>$<hex SHA-256 of the whole token>". The id lets a
// server find the one hash a presented token can match, so an unknown or
// wrong token costs one map lookup and at most one SHA-256, never a loop
// over every configured hash. The secret is 256 random bits, so a slow
// password hash (bcrypt) would add cost and no protection: nobody can
// guess a preimage of SHA-256 over 256 random bits.
package apitoken

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

const (
	prefix     = "kvt_"
	hashPrefix = "sha256$"
	idLen      = 16 // hex digits
	secretLen  = 43 // base64url characters of 32 bytes
	// Len is the length of every token.
	Len = len(prefix) + idLen + 1 + secretLen
)

// New makes a random token and the hash line for auth.tokens[].token_hash.
func New() (token, hash string, err error) {
	b := make([]byte, idLen/2+32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("random token: %w", err)
	}
	token = prefix + hex.EncodeToString(b[:idLen/2]) + "_" + base64.RawURLEncoding.EncodeToString(b[idLen/2:])
	return token, Hash(token), nil
}

// Hash is the stored form of a token. It panics on a malformed token
// (callers hash only what New made or Parse accepted).
func Hash(token string) string {
	id, ok := ID(token)
	if !ok {
		panic("apitoken.Hash: malformed token")
	}
	sum := sha256.Sum256([]byte(token))
	return hashPrefix + id + "$" + hex.EncodeToString(sum[:])
}

// ID returns the id of a well-formed token. It reads only the token's
// shape: whether the token is valid is Stored.Verify's question.
func ID(token string) (string, bool) {
	if len(token) != Len || !strings.HasPrefix(token, prefix) {
		return "", false
	}
	id := token[len(prefix) : len(prefix)+idLen]
	if !isHex(id) || token[len(prefix)+idLen] != '_' {
		return "", false
	}
	for _, r := range token[len(prefix)+idLen+1:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return "", false
		}
	}
	return id, true
}

// Stored is a parsed token_hash.
type Stored struct {
	ID  string
	sum []byte
}

// ErrLegacyHash is returned for a bcrypt token hash of kvtrail before token
// ids: such a token carries no id, so checking it needs one bcrypt per
// configured token for every presented token.
var ErrLegacyHash = errors.New("a bcrypt token hash (tokens without an id are no longer accepted: " +
	"each unknown token cost one bcrypt per configured token); make a new token with `kvtrail user new-token`")

// ParseHash reads a token_hash.
func ParseHash(h string) (Stored, error) {
	if strings.HasPrefix(h, "$2a$") || strings.HasPrefix(h, "$2b$") || strings.HasPrefix(h, "$2y$") {
		return Stored{}, ErrLegacyHash
	}
	rest, ok := strings.CutPrefix(h, hashPrefix)
	id, hexSum, ok2 := strings.Cut(rest, "$")
	if !ok || !ok2 || len(id) != idLen || !isHex(id) || len(hexSum) != 64 || !isHex(hexSum) {
		return Stored{}, errors.New(`must be "sha256$<16 hex id>$<64 hex>" as printed by ` + "`kvtrail user new-token`")
	}
	sum, _ := hex.DecodeString(hexSum)
	return Stored{ID: id, sum: sum}, nil
}

// Verify reports whether token is the one this hash was made from, in
// time independent of where a wrong token differs.
func (s Stored) Verify(token string) bool {
	sum := sha256.Sum256([]byte(token))
	return len(s.sum) == len(sum) && subtle.ConstantTimeCompare(sum[:], s.sum) == 1
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}
