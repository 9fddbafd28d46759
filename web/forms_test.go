package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestStaleFormSaysExpired: a form without the session's CSRF token (none,
// or one from an earlier sign-in) is refused without changing anything,
// and the page says the form expired and links to a fresh copy of the page
// it came from; a cross-origin post is still refused as forbidden.
func TestStaleFormSaysExpired(t *testing.T) {
	u := seededUI(t)
	_, oldCSRF, _ := u.login(t, "responder-user", testPassword)
	c, csrf, code := u.login(t, "responder-user", testPassword)
	if code != http.StatusSeeOther || csrf == "" || oldCSRF == "" || oldCSRF == csrf {
		t.Fatalf("login = %d; tokens must differ per sign-in (%q, %q)", code, oldCSRF, csrf)
	}
	countCases := func() int {
		_, b := u.api(t, "viewer", "GET", "/api/v1/cases", nil)
		var v casesView
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return len(v.Cases)
	}
	before := countCases()
	post := func(path, token, referer, origin string) (int, string) {
		t.Helper()
		form := url.Values{"name": {"stale"}, "window_from": {"2026-07-01T10:00:00"}, "window_to": {"2026-07-01T11:00:00"}}
		if token != "" {
			form.Set("_csrf", token)
		}
		req, _ := http.NewRequest("POST", u.srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if referer != "" {
			req.Header.Set("Referer", referer)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	reload := regexp.MustCompile(`id="reload"[^>]*href="([^"]*)"`)
	for _, tc := range []struct {
		name, path, token, referer, wantReload string
	}{
		{"no token", "/cases", "", "", "/cases"},
		{"token of an earlier sign-in", "/cases", oldCSRF, "", "/cases"},
		{"referer on this site", "/cases", oldCSRF, u.srv.URL + "/cases?from=x", "/cases?from=x"},
		{"referer elsewhere is not followed", "/cases", "", "http://evil.example/x", "/cases"},
		{"a case action reloads the case", "/cases/case-x/hold", "", "", "/cases/case-x"},
		{"logout", "/logout", oldCSRF, "", "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(tc.path, tc.token, tc.referer, "")
			if code != http.StatusForbidden {
				t.Fatalf("status %d, want 403", code)
			}
			if !strings.Contains(body, "form has expired") || strings.Contains(body, "permission") {
				t.Errorf("page does not say the form expired: %.400s", body)
			}
			m := reload.FindStringSubmatch(body)
			if m == nil || strings.ReplaceAll(m[1], "&amp;", "&") != tc.wantReload {
				t.Errorf("reload link %v, want %q", m, tc.wantReload)
			}
		})
	}
	if n := countCases(); n != before {
		t.Errorf("refused forms changed the cases: %d -> %d", before, n)
	}
	// Cross-origin is an attack, not an expired form.
	if code, body := post("/cases", csrf, "", "http://evil.example"); code != http.StatusForbidden || !strings.Contains(body, "permission") {
		t.Errorf("cross-origin post = %d: %.300s", code, body)
	}
	// The session is still good: the same form with the current token works.
	if code, _ := post("/cases", csrf, "", ""); code != http.StatusSeeOther {
		t.Errorf("post with the current token = %d", code)
	}
	// An API call made with the cookie names the header to send.
	req, _ := http.NewRequest("POST", u.srv.URL+"/api/v1/cases", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "X-CSRF-Token") {
		t.Errorf("API without CSRF = %d %s", resp.StatusCode, b)
	}
}

// TestRejectedCaseFormKeepsInput: a case form with the window's end before
// its start (new case, or an edit) comes back as the page with the message
// and what the user typed, and changes nothing.
func TestRejectedCaseFormKeepsInput(t *testing.T) {
	u := seededUI(t)
	c, csrf, _ := u.login(t, "responder-user", testPassword)
	post := func(path string, form url.Values) (int, string) {
		t.Helper()
		form.Set("_csrf", csrf)
		resp, err := c.PostForm(u.srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := url.Values{"name": {"kept case"}, "window_from": {"2026-07-01T10:00:00"}, "window_to": {"2026-07-01T11:00:00"}}
	code, _ := post("/cases", good)
	if code != http.StatusSeeOther {
		t.Fatalf("create = %d", code)
	}
	_, b := u.api(t, "viewer", "GET", "/api/v1/cases", nil)
	var list casesView
	if err := json.Unmarshal(b, &list); err != nil || len(list.Cases) == 0 {
		t.Fatalf("cases: %s", b)
	}
	id := list.Cases[0].ID
	bad := url.Values{"name": {"edited <b>name</b>"}, "window_from": {"2026-07-01T12:00:00"}, "window_to": {"2026-07-01T11:00:00"},
		"tenants": {"acme, beta"}, "notes": {"typed notes"}, "status": {"closed"}}
	for _, path := range []string{"/cases", "/cases/" + id} {
		code, body := post(path, bad)
		if code != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400", path, code)
		}
		for _, want := range []string{"from must be before to", `value="edited &lt;b&gt;name&lt;/b&gt;"`, `value="2026-07-01T12:00:00"`,
			`value="acme, beta"`, "typed notes", `role="alert"`, `<nav>`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the page lacks %q", path, want)
			}
		}
	}
	if !strings.Contains(func() string { _, b := post("/cases/"+id, bad); return b }(), `<option value="closed" selected>`) {
		t.Error("the edit form lost the chosen status")
	}
	_, b = u.api(t, "viewer", "GET", "/api/v1/cases/"+id, nil)
	var v caseView
	if err := json.Unmarshal(b, &v); err != nil || v.Case.Name != "kept case" || v.Case.Status != "open" {
		t.Errorf("a rejected edit changed the case: %+v", v.Case)
	}
}
