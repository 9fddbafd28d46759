package apitoken

import (
	"errors"
	"strings"
	"testing"
)

func TestNewTokenVerifiesAgainstItsHash(t *testing.T) {
	tok, hash, err := New()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := ID(tok)
	if !ok || len(tok) != Len {
		t.Fatalf("New made a token ID rejects: %q", tok)
	}
	st, err := ParseHash(hash)
	if err != nil {
		t.Fatalf("ParseHash(%q): %v", hash, err)
	}
	if st.ID != id {
		t.Fatalf("hash id %q, token id %q", st.ID, id)
	}
	if !st.Verify(tok) {
		t.Fatal("token does not verify against its own hash")
	}
	other, _, _ := New()
	if st.Verify(other) {
		t.Fatal("another token verifies")
	}
	// Same id, secret changed in its last character.
	last := byte('A')
	if tok[len(tok)-1] == 'A' {
		last = 'B'
	}
	wrong := tok[:len(tok)-1] + string(last)
	if st.Verify(wrong) {
		t.Fatal("a token differing in the last character verifies")
	}
	tok2, _, _ := New()
	if tok2 == tok {
		t.Fatal("two New tokens are equal")
	}
}

func TestIDRejectsMalformedTokens(t *testing.T) {
	good, _, _ := New()
	for _, tt := range []struct{ name, tok string }{
		{"empty", ""},
		{"old style without id", "kvt_" + strings.Repeat("A", 43)},
		{"upper-case id", "kvt_" + strings.ToUpper(good[4:20]) + good[20:]},
		{"no separator", good[:20] + "-" + good[21:]},
		{"too long", good + "A"},
		{"bad secret character", good[:Len-1] + "="},
		{"wrong prefix", "kvx_" + good[4:]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "upper-case id" && strings.ToUpper(good[4:20]) == good[4:20] {
				t.Skip("id happens to be digits only")
			}
			if _, ok := ID(tt.tok); ok {
				t.Fatalf("ID accepted %q", tt.tok)
			}
		})
	}
}

func TestParseHash(t *testing.T) {
	_, good, _ := New()
	for _, tt := range []struct {
		name, hash string
		legacy     bool
		ok         bool
	}{
		{"new", good, false, true},
		{"bcrypt", "$2a$12$" + strings.Repeat("a", 53), true, false},
		{"short sum", good[:len(good)-1], false, false},
		{"upper-case sum", strings.ToUpper(good), false, false},
		{"no id", "sha256$$" + strings.Repeat("0", 64), false, false},
		{"empty", "", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHash(tt.hash)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseHash(%q) err = %v, want ok=%v", tt.hash, err, tt.ok)
			}
			if errors.Is(err, ErrLegacyHash) != tt.legacy {
				t.Fatalf("legacy = %v, want %v", errors.Is(err, ErrLegacyHash), tt.legacy)
			}
		})
	}
}
