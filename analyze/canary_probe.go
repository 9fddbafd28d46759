package analyze

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// CanaryProbe turns the canary prober's verdicts (table probes, written by
// `kvtrail probe` and by serve with probes.enabled) into findings, so they
// are listed, counted and alerted like every other finding:
//   - leak: a probe's answer carried another probe's marker. Markers are
//     random 64-bit codes sent once, so this is proof that one request's
//     data reached another's answer; both requests are the evidence.
//   - over_limit_served: a prompt placed just above a node's rejection
//     threshold (posture) was answered 200, where a 4xx belongs.
type CanaryProbe struct{}

// Name implements Analyzer.
func (*CanaryProbe) Name() string { return "canary_probe" }

func init() {
	Register(Registration{Order: 110,
		New: func(Config) Analyzer {
			return &CanaryProbe{}
		}})
}

// Version implements Analyzer.
func (*CanaryProbe) Version() string { return "1" }

// Params implements Analyzer.
func (*CanaryProbe) Params() any { return struct{}{} }

const canaryProbesSQL = `SELECT probe_id, ts_ns, identity, endpoint, kind, stream, marker, threshold_tokens, threshold_node,
 prompt_tokens, completion_tokens, http_status, response_text, foreign_markers, verdict
FROM probes
WHERE ts >= toDateTime(?) AND ts <= toDateTime(?) AND verdict IN ('leak', 'over_limit_served')
ORDER BY ts_ns, probe_id`

const canaryMarkersSQL = `SELECT marker, probe_id, ts_ns, identity, kind FROM probes WHERE has(?, marker)`

type probeRow struct {
	id, identity, endpoint, kind, marker, thNode, text, verdict string
	ns, th, prompt, completion                                  uint64
	stream                                                      uint8
	status                                                      uint16
	foreign                                                     []string
}

// Analyze implements Analyzer.
func (*CanaryProbe) Analyze(ctx context.Context, d *Dataset) ([]Finding, error) {
	from, to := uint32(0), uint32(0xffffffff)
	if !d.Window.From.IsZero() {
		from, to = unix(d.Window.From), unix(d.Window.To)
	}
	rows, err := d.DB.Query(ctx, canaryProbesSQL, from, to)
	if err != nil {
		return nil, fmt.Errorf("canary probes: %w", err)
	}
	var list []probeRow
	var markers []string
	for rows.Next() {
		var p probeRow
		if err := rows.Scan(&p.id, &p.ns, &p.identity, &p.endpoint, &p.kind, &p.stream, &p.marker, &p.th, &p.thNode,
			&p.prompt, &p.completion, &p.status, &p.text, &p.foreign, &p.verdict); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan canary probe: %w", err)
		}
		list = append(list, p)
		markers = append(markers, p.foreign...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read canary probes: %w", err)
	}
	type origin struct {
		id, identity, kind string
		ns                 uint64
	}
	owners := map[string]origin{}
	if len(markers) > 0 {
		mr, err := d.DB.Query(ctx, canaryMarkersSQL, markers)
		if err != nil {
			return nil, fmt.Errorf("canary probe markers: %w", err)
		}
		for mr.Next() {
			var m string
			var o origin
			if err := mr.Scan(&m, &o.id, &o.ns, &o.identity, &o.kind); err != nil {
				mr.Close()
				return nil, fmt.Errorf("scan probe marker: %w", err)
			}
			owners[m] = o
		}
		mr.Close()
		if err := mr.Err(); err != nil {
			return nil, fmt.Errorf("read probe markers: %w", err)
		}
	}
	var out []Finding
	for _, p := range list {
		ts := time.Unix(0, int64(p.ns)).UTC()
		f := Finding{Severity: High, TS: ts, FirstTS: ts, LastTS: ts, DecodeDPRank: -1, RequestKey: "probe:" + p.id,
			Subject: "probe:" + p.id,
			Details: map[string]string{"probe_id": p.id, "identity": p.identity, "endpoint": p.endpoint, "kind": p.kind,
				"marker": p.marker, "http_status": fmt.Sprint(p.status), "prompt_tokens": itoa(p.prompt),
				"completion_tokens": itoa(p.completion), "stream": fmt.Sprint(p.stream == 1), "answer": p.text}}
		switch p.verdict {
		case "leak":
			f.Confidence = 1
			var who []string
			crossTenant := false
			for i, m := range p.foreign {
				o, ok := owners[m]
				if !ok {
					who = append(who, m+" (sent by no probe on record)")
					continue
				}
				f.ForeignRequestKeys = append(f.ForeignRequestKeys, "probe:"+o.id)
				if o.identity != p.identity {
					crossTenant = true
				}
				who = append(who, fmt.Sprintf("%s from probe %s (identity %s, %s, sent %s)", m, o.id, o.identity, o.kind,
					fmtTime(time.Unix(0, int64(o.ns)))))
				f.Details[fmt.Sprintf("foreign_%d_probe_id", i)] = o.id
				f.Details[fmt.Sprintf("foreign_%d_identity", i)] = o.identity
			}
			scope := "another request of the same identity"
			if crossTenant {
				scope = "another identity (tenant)"
			}
			f.GroupKey = "probe:leak:" + p.endpoint
			f.Title = fmt.Sprintf("Canary probe %s (identity %s) received %s's marker", p.id, p.identity, scope)
			f.Explanation = fmt.Sprintf("Probe %s (%s, identity %s) asked for its own marker %s and got HTTP %d with an answer carrying %s. "+
				"Markers are random and sent once, so data of one request reached another request's answer. Answer (cut): %q",
				p.id, p.kind, p.identity, p.marker, p.status, strings.Join(who, "; "), p.text)
		case "over_limit_served":
			f.Confidence = 0.9
			f.PrefillNode = p.thNode
			f.GroupKey = "probe:over_limit:" + p.thNode
			f.Title = fmt.Sprintf("Over-limit canary prompt answered %d by the endpoint (threshold %s tokens of %s)", p.status, commas(p.th), p.thNode)
			f.Explanation = fmt.Sprintf("Probe %s (identity %s) sent a prompt sized just above %s's rejection threshold of %s tokens "+
				"(max_req_input_len from its boot lines); a 4xx belongs there, the endpoint answered %d with %d completion tokens "+
				"(reported prompt_tokens %d). This is the #30233 path: the prompt was rejected by the prefill scheduler and served by decode from pages it never received.",
				p.id, p.identity, p.thNode, commas(p.th), p.status, p.completion, p.prompt)
		}
		out = append(out, f)
	}
	return out, nil
}
