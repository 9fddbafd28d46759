package web

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvtrail/kvtrail/domain"
)

// TestFindingRequestShown: a finding's page names its request by gateway id
// (linked to the request page) when the gateway logged one, else by its
// request key (a room or a line key, or an aborted request the gateway
// never answered), escaped, else a dash. The key is log data.
func TestFindingRequestShown(t *testing.T) {
	tmpl, err := parseTemplates()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		gw, key     string
		want, avoid []string
	}{
		{"gateway id", "chatcmpl-1", "chatcmpl-1",
			[]string{`<a href="/requests/chatcmpl-1?tenant=acme">chatcmpl-1</a>`}, []string{`id="request-key"`}},
		{"key only", "", "room:42",
			[]string{`<span id="request-key">room:42</span> (no gateway response logged)`}, []string{`href="/requests/`}},
		{"hostile key", "", `<script>alert(1)</script>`,
			[]string{`<span id="request-key">&lt;script&gt;alert(1)&lt;/script&gt;</span>`}, []string{`<script>alert`}},
		{"neither", "", "", []string{`<dt>Request</dt><dd>—</dd>`}, []string{`id="request-key"`, `href="/requests/`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &domain.FindingDetail{Finding: domain.FindingView{FindingID: "f-1", Title: "t", Tenant: "acme",
				GatewayRequestID: tc.gw, RequestKey: tc.key}}
			var buf bytes.Buffer
			if err := tmpl["finding"].Execute(&buf, pageData{Data: d}); err != nil {
				t.Fatal(err)
			}
			page := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("page lacks %s", w)
				}
			}
			for _, a := range tc.avoid {
				if strings.Contains(page, a) {
					t.Errorf("page has %s", a)
				}
			}
		})
	}
}
