package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

var (
	linkRe = map[string]*regexp.Regexp{}
	rowRe  = regexp.MustCompile(`<tr[^>]*><td>([^<]*)</td><td>(?:<a href="([^"]*)")?`)
)

func pageLink(body, id string) string {
	re, ok := linkRe[id]
	if !ok {
		re = regexp.MustCompile(`id="` + id + `" href="([^"]*)"`)
		linkRe[id] = re
	}
	m := re.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

// rowKeys identifies a page's rows by their first cells and first links.
func rowKeys(body string) string {
	var out []string
	for _, m := range rowRe.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1]+"|"+m[2])
	}
	return strings.Join(out, "\n")
}

// TestPageLinks walks every keyset listing forward with "next", back with
// "previous" and home with "first", and requires each page to show the
// same rows whichever way it was reached, with the filters kept.
func TestPageLinks(t *testing.T) {
	u := seededUI(t)
	_, body := u.api(t, "compliance", "POST", "/api/v1/cases", map[string]any{"name": "pages",
		"window_from": seedStart.Format("2006-01-02T15:04:05"), "window_to": seedStart.Add(2 * 3600e9).Format("2006-01-02T15:04:05")})
	caseID := regexp.MustCompile(`"case_id":"([^"]+)"`).FindSubmatch(body)
	if caseID == nil {
		t.Fatalf("case: %s", body)
	}
	get := func(path string) string {
		t.Helper()
		code, b := u.api(t, "admin", "GET", path, nil)
		if code != http.StatusOK {
			t.Fatalf("%s = %d %.300s", path, code, b)
		}
		return string(b)
	}
	// Audit rows to page through: searches, filtered by action.
	for i := 0; i < 7; i++ {
		get(fmt.Sprintf("/search?tenant=acme&limit=%d", 20+i))
	}
	for _, tc := range []struct {
		name, first, keep string
		pages             int
	}{
		{"search", "/search?tenant=acme&sort=ts_asc&limit=10", "tenant=acme", 3},
		{"tenant view", "/cases/" + string(caseID[1]) + "/tenants/acme?limit=10", "limit=10", 3},
		{"audit", "/admin/audit?action=search&limit=3", "action=search", 3},
		{"findings", "/findings?limit=1", "limit=1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var urls, rows []string
			at := tc.first
			for at != "" {
				b := get(at)
				if len(urls) == 0 && (pageLink(b, "prev-page") != "" || pageLink(b, "first-page") != "") {
					t.Errorf("the first page links to a previous page")
				}
				urls, rows = append(urls, at), append(rows, rowKeys(b))
				if rows[len(rows)-1] == "" {
					t.Fatalf("%s shows no rows", at)
				}
				at = pageLink(b, "next-page")
				if at != "" && !strings.Contains(at, tc.keep) {
					t.Errorf("next link %s lost the filter %s", at, tc.keep)
				}
				if len(urls) > 20 {
					t.Fatal("no last page")
				}
			}
			if len(urls) < tc.pages {
				t.Fatalf("%d pages, want at least %d", len(urls), tc.pages)
			}
			// Back from the last page to the first, one page at a time.
			for i := len(urls) - 1; i > 0; i-- {
				b := get(urls[i])
				prev := pageLink(b, "prev-page")
				if prev == "" || rowKeys(get(prev)) != rows[i-1] {
					t.Errorf("page %d: previous (%s) does not show page %d", i+1, prev, i)
				}
				first := pageLink(b, "first-page")
				if first == "" || rowKeys(get(first)) != rows[0] || !strings.Contains(first, tc.keep) {
					t.Errorf("page %d: first page link %q", i+1, first)
				}
			}
		})
	}
}

// TestPagerTrailIsBounded: the trail of cursors in a link stays bounded;
// once it was cut, the page where it runs out offers only the first page.
func TestPagerTrailIsBounded(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	links := func(rawQuery, next string) pageLinks {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest("GET", "/search?"+rawQuery, nil)
		return pager(c, "/search", next)
	}
	q := "tenant=a"
	var l pageLinks
	for i := 0; i < maxTrail+10; i++ {
		l = links(q, fmt.Sprint("c", i+1))
		if i > 0 && l.Prev == "" {
			t.Fatalf("page %d has no previous page", i+1)
		}
		q = strings.TrimPrefix(l.Next, "/search?")
	}
	v, _ := url.ParseQuery(q)
	trail := strings.Split(v.Get("trail"), trailSep)
	if len(trail) != maxTrail || trail[0] != trailCut || v.Get("tenant") != "a" {
		t.Fatalf("trail after %d pages: %d entries, %v", maxTrail+10, len(trail), trail[:2])
	}
	// Walk back until the cut: previous links exist, then only "first".
	for steps := 0; ; steps++ {
		l = links(q, "x")
		if l.Prev == "" {
			if l.First != "/search?tenant=a" || steps != maxTrail-1 {
				t.Errorf("after %d steps back: first %q", steps, l.First)
			}
			break
		}
		q = strings.TrimPrefix(l.Prev, "/search?")
		if steps > maxTrail+5 {
			t.Fatal("the trail never ran out")
		}
	}
}
