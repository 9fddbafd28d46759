package domain

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestParseRoleAcceptsLegacySpellings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Role
		bad  bool
	}{
		{"received", Received, false},
		{" Received_Foreign_Data ", Received, false},
		{"exposed", Exposed, false},
		{"possibly_exposed", Exposed, false},
		{"", "", false},
		{"victim", "", true},
	} {
		got, err := ParseRole(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseRole(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.bad)
		}
		if tc.bad && KindOf(err) != Invalid {
			t.Errorf("ParseRole(%q) error kind %v, want invalid", tc.in, KindOf(err))
		}
	}
}

func TestTierAndSeverityOrder(t *testing.T) {
	if !(Confirmed.Rank() < Likely.Rank() && Likely.Rank() < Possible.Rank() && Possible.Rank() < Tier("").Rank()) {
		t.Fatal("tiers are not ordered most certain first")
	}
	if _, err := ParseTier("maybe"); err == nil {
		t.Fatal("ParseTier accepted an unknown tier")
	}
	if v, err := ParseSeverity("medium"); err != nil || v != Medium {
		t.Fatalf("ParseSeverity(medium) = %v, %v", v, err)
	}
	if !High.AtLeast(Medium) || Low.AtLeast(Medium) {
		t.Fatal("AtLeast disagrees with Rank")
	}
}

func TestErrorKindsMapOnce(t *testing.T) {
	cause := errors.New("dial tcp: refused")
	err := fmt.Errorf("load findings: %w", E(Unavailable, cause))
	if KindOf(err) != Unavailable || HTTPStatus(KindOf(err)) != http.StatusServiceUnavailable || ExitCode(KindOf(err)) != ExitUnavailable {
		t.Fatalf("kind %v status %d exit %d", KindOf(err), HTTPStatus(KindOf(err)), ExitCode(KindOf(err)))
	}
	if !errors.Is(err, cause) {
		t.Fatal("the cause is lost")
	}
	if KindOf(cause) != Internal || Message(cause) != "internal error" {
		t.Fatal("a plain error must read as internal, without its detail")
	}
	nf := Errorf(NotFound, "finding %q not found", "abc")
	if Message(nf) != `finding "abc" not found` || HTTPStatus(KindOf(nf)) != http.StatusNotFound {
		t.Fatalf("message %q", Message(nf))
	}
	wrapped := Errorf(Invalid, "bad window: %w", cause)
	if !errors.Is(wrapped, cause) {
		t.Fatal("Errorf with %w must keep the cause")
	}
}
