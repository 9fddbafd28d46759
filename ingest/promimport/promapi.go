package promimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// APIError is an error Prometheus reported itself: a JSON body with
// status "error" (bad PromQL, too many points, query timeout, …).
type APIError struct {
	HTTPStatus int    // 0 when the error came with a 2xx status
	Type       string // errorType: bad_data, execution, timeout, …
	Msg        string // error, shortened to maxErrorText
}

func (e *APIError) Error() string {
	return fmt.Sprintf("prometheus error (HTTP %d, %s): %s", e.HTTPStatus, e.Type, e.Msg)
}

// HTTPError is a non-2xx answer that is not a Prometheus API error, e.g.
// from a proxy in front of it. Snippet holds only the start of the body.
type HTTPError struct {
	Status  string
	Snippet string
}

func (e *HTTPError) Error() string {
	if e.Snippet == "" {
		return "HTTP " + e.Status
	}
	return fmt.Sprintf("HTTP %s: %s", e.Status, e.Snippet)
}

// Limits on what goes into an error message: a proxy's error page or a
// huge Prometheus message must not flood logs.
const (
	maxErrorBody = 64 << 10
	maxErrorText = 512
)

// promSeries is one element of a matrix result.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Values []promPoint       `json:"values"`
}

// promPoint is [unix_seconds, "value"]; Prometheus sends values as strings
// so that NaN and ±Inf survive JSON.
type promPoint struct {
	Ms    int64
	Value float64
}

func (p *promPoint) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return fmt.Errorf("point %.40q is not a [time, value] pair", s)
	}
	ts, val, ok := strings.Cut(s[1:len(s)-1], ",")
	if !ok {
		return fmt.Errorf("point %.40q is not a [time, value] pair", s)
	}
	sec, err := strconv.ParseFloat(strings.TrimSpace(ts), 64)
	if err != nil {
		return fmt.Errorf("point time %.40q: %w", ts, err)
	}
	var v string
	if err := json.Unmarshal([]byte(strings.TrimSpace(val)), &v); err != nil {
		return fmt.Errorf("point value %.40q is not a JSON string: %w", val, err)
	}
	// ParseFloat accepts Prometheus' "NaN", "+Inf" and "-Inf" spellings.
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("point value %.40q: %w", v, err)
	}
	// Times are at most millisecond precise (Prometheus' own resolution);
	// rounding undoes float noise in the seconds value.
	p.Ms = int64(sec*1000 + copysign(0.5, sec))
	p.Value = f
	return nil
}

func copysign(x, sign float64) float64 {
	if sign < 0 {
		return -x
	}
	return x
}

// promClient calls one Prometheus server.
type promClient struct {
	base     *url.URL
	http     *http.Client
	timeout  time.Duration
	maxBytes int64
}

// queryRange runs one query_range call and hands each series of the matrix
// to fn as it is decoded, so a large answer is never held whole in memory.
// It returns Prometheus' warnings.
func (c *promClient) queryRange(ctx context.Context, query string, w window, step time.Duration, fn func(*promSeries) error) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	form := url.Values{
		"query": {query},
		"start": {formatSeconds(w.start)},
		"end":   {formatSeconds(w.end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	// POST keeps long selectors out of URL length limits; Prometheus
	// accepts both.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath("api/v1/query_range").String(),
		strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("build query_range request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query_range: %w", err) // *url.Error; the client strips passwords
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, errorFromResponse(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "" && mt != "application/json" {
		return nil, fmt.Errorf("query_range answered %s, not JSON: is %s a Prometheus server?", mt, c.base.Redacted())
	}
	body := &limitedReader{r: resp.Body, left: c.maxBytes}
	warnings, err := decodeQueryRange(body, fn)
	if body.exceeded {
		return warnings, fmt.Errorf("query_range response exceeds %d bytes: use a narrower query or a longer step", c.maxBytes)
	}
	return warnings, err
}

// errorFromResponse turns a non-2xx answer into an APIError when the body
// is Prometheus' JSON error, else an HTTPError with a short snippet.
func errorFromResponse(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Status == "error" {
		return &APIError{HTTPStatus: resp.StatusCode, Type: e.ErrorType, Msg: shorten(e.Error)}
	}
	return &HTTPError{Status: resp.Status, Snippet: shorten(string(b))}
}

// shorten makes text safe for one log line: printable, at most
// maxErrorText bytes.
func shorten(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "… (truncated)"
	}
	return s
}

// decodeQueryRange walks the response object token by token so the
// matrix's series can be streamed to fn.
func decodeQueryRange(r io.Reader, fn func(*promSeries) error) (warnings []string, err error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, fmt.Errorf("decode query_range response: %w", err)
	}
	var status, errType, errMsg, resultType string
	for dec.More() {
		key, err := keyToken(dec)
		if err != nil {
			return warnings, fmt.Errorf("decode query_range response: %w", err)
		}
		switch key {
		case "status":
			err = dec.Decode(&status)
		case "errorType":
			err = dec.Decode(&errType)
		case "error":
			err = dec.Decode(&errMsg)
		case "warnings", "infos":
			var w []string
			err = dec.Decode(&w)
			warnings = append(warnings, w...)
		case "data":
			resultType, err = decodeData(dec, fn)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return warnings, fmt.Errorf("decode query_range response (%s): %w", key, err)
		}
	}
	switch {
	case status == "error":
		return warnings, &APIError{Type: errType, Msg: shorten(errMsg)}
	case status != "success":
		return warnings, fmt.Errorf("query_range response has status %q", shorten(status))
	case resultType != "matrix":
		return warnings, fmt.Errorf("query_range returned resultType %q, want matrix", shorten(resultType))
	}
	return warnings, nil
}

func decodeData(dec *json.Decoder, fn func(*promSeries) error) (resultType string, err error) {
	if err := expectDelim(dec, '{'); err != nil {
		return "", err
	}
	for dec.More() {
		key, err := keyToken(dec)
		if err != nil {
			return "", err
		}
		switch key {
		case "resultType":
			err = dec.Decode(&resultType)
		case "result":
			err = decodeResult(dec, fn)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return "", err
		}
	}
	return resultType, expectDelim(dec, '}')
}

func decodeResult(dec *json.Decoder, fn func(*promSeries) error) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		var s promSeries
		if err := dec.Decode(&s); err != nil {
			return err
		}
		if err := fn(&s); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, got %v", want, t)
	}
	return nil
}

func keyToken(dec *json.Decoder) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	k, ok := t.(string)
	if !ok {
		return "", errors.New("expected an object key")
	}
	return k, nil
}

// formatSeconds renders t as the unix seconds Prometheus expects, with
// millisecond precision.
func formatSeconds(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

// limitedReader is io.LimitReader that remembers whether the limit cut the
// stream, so a truncated answer is reported as too large rather than as
// broken JSON.
type limitedReader struct {
	r        io.Reader
	left     int64
	exceeded bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// Probe one byte: a body of exactly the limit is fine.
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			l.exceeded = true
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
