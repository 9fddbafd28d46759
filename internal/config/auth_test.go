package config

import (
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/internal/apitoken"
)

func TestValidateAuthTokensAndProxies(t *testing.T) {
	_, h1, _ := apitoken.New()
	_, h2, _ := apitoken.New()
	tests := []struct {
		name    string
		mutate  func(*Auth)
		wantErr []string
	}{
		{"new-format tokens", func(a *Auth) {
			a.Tokens = []Token{{Name: "a", Role: "viewer", TokenHash: Secret(h1)}, {Name: "b", Role: "ingester", TokenHash: Secret(h2)}}
		}, nil},
		{"legacy bcrypt token hash", func(a *Auth) {
			a.Tokens = []Token{{Name: "a", Role: "viewer", TokenHash: Secret("$2a$12$" + strings.Repeat("x", 53))}}
		}, []string{"auth.tokens[0].token_hash", "kvtrail user new-token", "no longer accepted"}},
		{"garbage token hash", func(a *Auth) {
			a.Tokens = []Token{{Name: "a", Role: "viewer", TokenHash: "nope"}}
		}, []string{"auth.tokens[0].token_hash"}},
		{"same token id twice", func(a *Auth) {
			a.Tokens = []Token{{Name: "a", Role: "viewer", TokenHash: Secret(h1)}, {Name: "b", Role: "viewer", TokenHash: Secret(h1)}}
		}, []string{"auth.tokens[1].token_hash: has the same token id as a"}},
		{"proxy header with proxies", func(a *Auth) {
			a.ClientIPHeader, a.TrustedProxies = "X-Forwarded-For", "10.0.0.0/8, 192.168.1.5, ::1"
		}, nil},
		{"proxy header without proxies", func(a *Auth) { a.ClientIPHeader = "X-Real-IP" }, []string{"auth.trusted_proxies: must list"}},
		{"unknown header", func(a *Auth) { a.ClientIPHeader, a.TrustedProxies = "Forwarded", "10.0.0.1" }, []string{"auth.client_ip_header"}},
		{"bad proxy", func(a *Auth) { a.ClientIPHeader, a.TrustedProxies = "X-Real-IP", "10.0.0.300" }, []string{`auth.trusted_proxies: "10.0.0.300"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c.Auth)
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q, got nil", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestProxiesParsesAddressesAndCIDRs(t *testing.T) {
	ns, err := Auth{TrustedProxies: "10.1.0.0/16, 192.168.1.5,::1"}.Proxies()
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 3 || ns[0].String() != "10.1.0.0/16" || ns[1].String() != "192.168.1.5/32" || ns[2].String() != "::1/128" {
		t.Fatalf("Proxies = %v", ns)
	}
}
