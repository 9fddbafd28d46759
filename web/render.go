package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/kvtrail/kvtrail/domain"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// maxShownLine is how much of one log line a table cell shows; the
// evidence page shows the whole line.
const maxShownLine = 2000

// pages are the templates, each parsed with the shared layout.
var pageNames = []string{"login", "error", "overview", "search", "request", "findings", "finding", "evidence",
	"cases", "case", "export", "audit"}

func parseTemplates() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

func staticFiles() fs.FS {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	return sub
}

// shown makes log text safe and legible as text: invalid UTF-8 becomes
// U+FFFD, control characters (ANSI escapes, NUL, bidi overrides) become
// visible escapes, and the result is cut at max bytes. html/template then
// escapes what is left; this never returns template.HTML.
func shown(s string, max int) string {
	var b strings.Builder
	cut := false
	for i, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if max > 0 && i >= max {
			cut = true
			break
		}
		switch {
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.Is(unicode.Bidi_Control, r) || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	if cut {
		fmt.Fprintf(&b, " … [%d bytes in all]", len(s))
	}
	return b.String()
}

var funcs = template.FuncMap{
	"show":     func(s string) string { return shown(s, 200) },
	"showLine": func(s string) string { return shown(s, maxShownLine) },
	"showAll":  func(s string) string { return shown(s, 0) },
	"path":     url.PathEscape,
	"ts": func(t time.Time) string {
		if t.IsZero() || t.Unix() <= 0 {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
	},
	"tsns": func(ns uint64) string {
		if ns == 0 {
			return "—"
		}
		return time.Unix(0, int64(ns)).UTC().Format("2006-01-02 15:04:05.000") + " UTC"
	},
	// tsClock prints a node's own clock reading: no zone, since the node
	// wrote none that kvtrail keeps.
	"tsClock": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000")
	},
	"inputTime": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02T15:04:05")
	},
	"pct":    func(f float64) string { return strconv.FormatFloat(f*100, 'f', 0, 64) + "%" },
	"pctNum": func(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) },
	"f1":     func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"join":   func(s []string) string { return shown(strings.Join(s, ", "), 400) },
	"lower":  strings.ToLower,
	"sevClass": func(s string) string {
		switch strings.ToUpper(s) {
		case "HIGH", "CRITICAL":
			return "sev-high"
		case "MEDIUM":
			return "sev-medium"
		case "LOW":
			return "sev-low"
		}
		return "sev-other"
	},
	"roleLabel": func(r domain.Role) string { return r.Label() },
	"add":       func(a, b int) int { return a + b },
	"div":       func(a, b int) int { return a / b },
	"list":      func(v ...string) []string { return v },
}

// pageData wraps what a page shows with what the layout needs.
type pageData struct {
	Title   string
	Nav     string
	User    *Principal
	Caps    map[string]bool
	CSRF    string
	Refresh int
	Data    any
}

func (s *server) renderPage(c *gin.Context, status int, name string, data any) {
	s.renderTitled(c, status, name, "", data, 0)
}

func (s *server) renderTitled(c *gin.Context, status int, name, title string, data any, refresh int) {
	t := s.tmpl[name]
	p := principal(c)
	pd := pageData{Title: title, Nav: name, User: p, Data: data, Refresh: refresh}
	if p != nil {
		pd.Caps = p.Capabilities()
		pd.CSRF = p.csrf
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, pd); err != nil {
		s.log.Error("render failed", slog.String("page", name), slog.Any("err", err))
		c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("internal error"))
		return
	}
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// respond answers with JSON under /api/ and with the page otherwise: the API
// returns exactly the data the page shows.
func (s *server) respond(c *gin.Context, page, title string, data any) {
	if isAPI(c) {
		c.JSON(http.StatusOK, data)
		return
	}
	s.renderTitled(c, http.StatusOK, page, title, data, 0)
}

func (s *server) renderError(c *gin.Context, status int, msg string) {
	if isAPI(c) {
		c.AbortWithStatusJSON(status, gin.H{"error": msg})
		return
	}
	s.renderTitled(c, status, "error", http.StatusText(status), errorPage{Status: status, Message: msg}, 0)
}

// errorPage is what the error template shows; Reload, when set, is a link
// to a fresh copy of the page the user came from.
type errorPage struct {
	Status  int
	Message string
	Reload  string
}

// fail maps an error to a status. Internal errors are logged and shown
// without detail (they can carry SQL or log text).
func (s *server) fail(c *gin.Context, err error) {
	k := domain.KindOf(err)
	if k == domain.Internal || k == domain.Unavailable {
		s.log.Error("request failed", slog.String("route", c.FullPath()), slog.Any("err", err))
	}
	msg := domain.Message(err)
	if k == domain.Unavailable {
		// The cause names servers and ports; the user needs only "retry".
		msg = "the database is unavailable; try again shortly"
	}
	s.renderError(c, domain.HTTPStatus(k), msg)
	c.Abort()
}

// pageLinks are a keyset listing's links: the first page, the previous
// page and the next page ("" where there is none).
type pageLinks struct {
	First, Prev, Next string
}

// Keyset pages have no cheap way back, so each link carries the cursors of
// the pages before it in ?trail= (dot-separated; cursors are base64url or
// digits), at most maxTrail of them; a trail that lost its oldest cursors
// starts with trailCut, and once it is used up only "first page" is
// offered rather than a previous page that would skip some.
const (
	maxTrail = 30
	trailSep = "."
	trailCut = "~"
)

// pager builds the links of the listing at path for the current query
// (its filters kept), given the next page's cursor ("" on the last page).
func pager(c *gin.Context, path, next string) pageLinks {
	q := c.Request.URL.Query()
	cur := q.Get("cursor")
	var trail []string
	if t := q.Get("trail"); t != "" {
		trail = strings.Split(t, trailSep)
	}
	link := func(cursor string, trail []string) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Del("cursor")
		v.Del("trail")
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		if len(trail) > 0 {
			v.Set("trail", strings.Join(trail, trailSep))
		}
		if len(v) == 0 {
			return path
		}
		return path + "?" + v.Encode()
	}
	var l pageLinks
	if cur == "" {
		return pageLinks{Next: nextLink(link, next, nil)}
	}
	l.First = link("", nil)
	switch n := len(trail); {
	case n == 0:
		l.Prev = l.First
	case trail[n-1] == trailCut:
		// The trail was cut: the page before is not known.
	default:
		l.Prev = link(trail[n-1], trail[:n-1])
	}
	l.Next = nextLink(link, next, append(trail[:len(trail):len(trail)], cur))
	return l
}

func nextLink(link func(string, []string) string, next string, trail []string) string {
	if next == "" {
		return ""
	}
	if len(trail) > maxTrail {
		trail = append([]string{trailCut}, trail[len(trail)-maxTrail+1:]...)
	}
	return link(next, trail)
}

// parseTime accepts RFC 3339, "2006-01-02T15:04[:05]" (UTC, what
// datetime-local inputs send), a date, or Unix seconds. Empty is zero.
func parseTime(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && n < 1<<33 {
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Time{}, invalid("bad time " + strconv.Quote(shown(v, 40)) + ": use RFC 3339 or 2006-01-02T15:04:05 (UTC)")
}

// pageLimit reads ?limit= within [1, 500].
func pageLimit(c *gin.Context, def int) int {
	n, err := strconv.Atoi(c.Query("limit"))
	if err != nil || n <= 0 {
		return def
	}
	return min(n, 500)
}

func validUTF8Param(s string) bool { return utf8.ValidString(s) && len(s) <= 512 }
