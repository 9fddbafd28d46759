package promimport

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// serveProm answers every call with status, content type and body.
func serveProm(t *testing.T, status int, ctype, body string) *promClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/prefix/api/v1/query_range" || r.FormValue("query") == "" {
			http.Error(w, "unexpected request "+r.URL.Path, http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL + "/prefix")
	return &promClient{base: base, http: srv.Client(), timeout: 5 * time.Second, maxBytes: 1 << 20}
}

func TestQueryRangeDecode(t *testing.T) {
	body := `{"status":"success","data":{"resultType":"matrix","result":[
	 {"metric":{"__name__":"sglang:token_usage","instance":"10.0.1.1:30000"},
	  "values":[[1795824000,"0.5"],[1795824030.25,"NaN"],[1795824060,"+Inf"],[1795824090,"-Inf"],[1795824120,"1e3"]]},
	 {"metric":{"__name__":"sglang:context_len","instance":"10.0.1.2:30000","model_name":"m"},"values":[[1795824000,"40960"]]}
	]},"warnings":["PromQL info: something"]}`
	c := serveProm(t, 200, "application/json", body)
	var got []promSeries
	w := window{time.Unix(1795824000, 0), time.Unix(1795824120, 0)}
	warnings, err := c.queryRange(context.Background(), "x", w, 30*time.Second, func(s *promSeries) error {
		got = append(got, *s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || len(got) != 2 {
		t.Fatalf("warnings %v, %d series", warnings, len(got))
	}
	v := got[0].Values
	wantMs := []int64{1795824000000, 1795824030250, 1795824060000, 1795824090000, 1795824120000}
	for i, p := range v {
		if p.Ms != wantMs[i] {
			t.Errorf("point %d at %d ms, want %d", i, p.Ms, wantMs[i])
		}
	}
	if v[0].Value != 0.5 || !math.IsNaN(v[1].Value) || !math.IsInf(v[2].Value, 1) || !math.IsInf(v[3].Value, -1) || v[4].Value != 1000 {
		t.Errorf("values = %+v", v)
	}
	if got[1].Metric["model_name"] != "m" {
		t.Errorf("labels = %v", got[1].Metric)
	}
}

func TestQueryRangeErrors(t *testing.T) {
	huge := "<html>" + strings.Repeat("proxy error page ", 10000) + "</html>"
	tests := []struct {
		name   string
		status int
		ctype  string
		body   string
		check  func(t *testing.T, err error)
	}{
		{"prometheus bad_data", 400, "application/json",
			`{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"}`,
			func(t *testing.T, err error) {
				var ae *APIError
				if !errors.As(err, &ae) || ae.HTTPStatus != 400 || ae.Type != "bad_data" || !strings.Contains(ae.Msg, "11,000 points") {
					t.Errorf("err = %#v", err)
				}
			}},
		{"prometheus execution error with 200", 200, "application/json",
			`{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory"}`,
			func(t *testing.T, err error) {
				var ae *APIError
				if !errors.As(err, &ae) || ae.Type != "execution" {
					t.Errorf("err = %#v", err)
				}
			}},
		{"proxy error page is shortened", 502, "text/html", huge,
			func(t *testing.T, err error) {
				var he *HTTPError
				if !errors.As(err, &he) || !strings.HasPrefix(he.Status, "502") {
					t.Fatalf("err = %#v", err)
				}
				if len(err.Error()) > maxErrorText+100 || !strings.Contains(err.Error(), "truncated") {
					t.Errorf("error is %d bytes: %.200s", len(err.Error()), err)
				}
			}},
		{"login page with 200", 200, "text/html; charset=utf-8", "<html>login</html>",
			func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), "not JSON") {
					t.Errorf("err = %v", err)
				}
			}},
		{"vector instead of matrix", 200, "application/json",
			`{"status":"success","data":{"resultType":"vector","result":[]}}`,
			func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), `"vector"`) {
					t.Errorf("err = %v", err)
				}
			}},
		{"bad point", 200, "application/json",
			`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"a"},"values":[[1,2]]}]}}`,
			func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), "not a JSON string") {
					t.Errorf("err = %v", err)
				}
			}},
		{"too large", 200, "application/json",
			`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"a"},"values":[` +
				strings.Repeat(`[1,"1"],`, 200000) + `[1,"1"]]}]}}`,
			func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), "exceeds") {
					t.Errorf("err = %v", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serveProm(t, tt.status, tt.ctype, tt.body)
			_, err := c.queryRange(context.Background(), "x", window{time.Unix(0, 0), time.Unix(60, 0)}, time.Minute,
				func(*promSeries) error { return nil })
			tt.check(t, err)
		})
	}
}

func TestImportRangeValidates(t *testing.T) {
	im := &Importer{}
	t0 := time.Unix(1795824000, 0)
	tests := []struct {
		name string
		url  string
		r    Range
	}{
		{"no times", "http://p:9090", Range{}},
		{"reversed", "http://p:9090", Range{From: t0, To: t0.Add(-time.Hour)}},
		{"tiny step", "http://p:9090", Range{From: t0, To: t0, Step: time.Microsecond}},
		{"empty query", "http://p:9090", Range{From: t0, To: t0, Queries: []string{" "}}},
		{"not a URL", "p:9090", Range{From: t0, To: t0}},
	}
	for _, tt := range tests {
		if _, err := im.ImportRange(context.Background(), tt.url, tt.r); err == nil {
			t.Errorf("%s: want error", tt.name)
		}
	}
}
