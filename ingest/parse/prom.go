package parse

import (
	"errors"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// promParser parses the Prometheus text exposition format and OpenMetrics
// line by line (§f): a hand parser rather than expfmt.TextParser because
// the pipeline works per record (one line → one sample, raw line kept) and
// expfmt rejects OpenMetrics' "# EOF" and second-resolution timestamps.
// Histograms and summaries are already flattened in the text format: each
// _bucket/_sum/_count/quantile line is one sample with its le/quantile label.
//
// Timestamps: an integer ≥ 1e11 is milliseconds (text format), anything
// smaller or with a fraction is seconds (OpenMetrics, promtool backfill
// files); samples without one get ParseOptions.DefaultTime.
type promParser struct {
	opts  ParseOptions
	types map[string]string // family → TYPE, from "# TYPE" lines
	// series caches the parsed name and label set by their text: a
	// snapshot file repeats every series in every scrape, and the label
	// parse, sort and hash are most of a sample's cost.
	series map[string]promSeries
}

type promSeries struct {
	name         string
	keys, values []string
	id           uint64
}

const (
	maxPromTypes  = 1 << 14
	maxPromSeries = 1 << 16
)

// promSeriesKey is the text of a sample line's name and label set, when
// it can be told from the line without parsing it: the line up to its
// last '}' (a value or timestamp has none), or up to the end of a bare
// name. Lines with an exemplar ("#") are not cached.
func promSeriesKey(line string) (string, bool) {
	if strings.Contains(line, "#") {
		return "", false
	}
	if strings.IndexByte(line, '{') >= 0 {
		return line[:strings.LastIndexByte(line, '}')+1], true
	}
	i := 0
	for i < len(line) && (isIdent(line[i]) || line[i] == ':') && line[i] != '.' {
		i++
	}
	return line[:i], i > 0
}

func (p *promParser) Parse(rec Record) Parsed {
	line := strings.TrimSpace(strings.TrimSuffix(string(rec.Raw), "\r"))
	switch {
	case line == "":
		return unknown("empty line")
	case line == "# EOF":
		return Parsed{Status: StatusParsed, Kind: KindMarker, Event: "eof"}
	case strings.HasPrefix(line, "#"):
		f := strings.Fields(line)
		if len(f) >= 3 && (f[1] == "HELP" || f[1] == "TYPE" || f[1] == "UNIT") {
			if f[1] == "TYPE" && len(f) >= 4 && len(p.types) < maxPromTypes {
				p.types[f[2]] = f[3]
			}
			return Parsed{Status: StatusParsed, Kind: KindMetricMeta, Event: strings.ToLower(f[1])}
		}
		return unknown("comment")
	}
	var s MetricSample
	key, cacheable := promSeriesKey(line)
	if ser, hit := p.series[key]; cacheable && key != "" && hit {
		s = MetricSample{Name: ser.name, LabelKeys: ser.keys, LabelValues: ser.values, SeriesID: ser.id}
		if err := parsePromValue(&s, line[len(key):]); err != nil {
			return malformed(KindMetric, "sample", err.Error())
		}
	} else {
		var err error
		if s, err = parsePromSample(line); err != nil {
			return malformed(KindMetric, "sample", err.Error())
		}
		if cacheable && key != "" {
			if p.series == nil || len(p.series) >= maxPromSeries {
				p.series = map[string]promSeries{}
			}
			p.series[strings.Clone(key)] = promSeries{name: s.Name, keys: s.LabelKeys, values: s.LabelValues, id: s.SeriesID}
		}
	}
	if s.TS.IsZero() {
		s.TS = p.opts.DefaultTime
	}
	s.TS = p.opts.fix(s.TS)
	if !s.TS.IsZero() {
		s.TSMs = s.TS.UnixMilli()
	}
	s.Type = p.familyType(s.Name)
	return Parsed{Status: StatusParsed, Kind: KindMetric, Event: "sample", TS: s.TS, Metrics: []MetricSample{s}}
}

// familyType finds the TYPE of the family a sample belongs to.
func (p *promParser) familyType(name string) string {
	if t, ok := p.types[name]; ok {
		return t
	}
	for _, suf := range [...]string{"_bucket", "_sum", "_count", "_total", "_created", "_gsum", "_gcount"} {
		if strings.HasSuffix(name, suf) {
			if t, ok := p.types[strings.TrimSuffix(name, suf)]; ok {
				return t
			}
		}
	}
	return ""
}

type promLabel struct{ k, v string }

// parsePromSample parses `name{k="v",…} value [timestamp] [# exemplar]`.
// The name may also be quoted inside the braces (UTF-8 names).
func parsePromSample(line string) (MetricSample, error) {
	var s MetricSample
	i := 0
	for i < len(line) && (isIdent(line[i]) || line[i] == ':') && line[i] != '.' {
		i++
	}
	s.Name = line[:i]
	var labels []promLabel
	if i < len(line) && line[i] == '{' {
		var err error
		var qname string
		labels, qname, i, err = parsePromLabels(line, i+1)
		if err != nil {
			return s, err
		}
		if s.Name == "" {
			s.Name = qname
		}
	}
	if s.Name == "" {
		return s, errors.New("metric name missing")
	}
	if err := parsePromValue(&s, line[i:]); err != nil {
		return s, err
	}
	sort.Slice(labels, func(a, b int) bool { return labels[a].k < labels[b].k })
	s.LabelKeys = make([]string, len(labels))
	s.LabelValues = make([]string, len(labels))
	for j, l := range labels {
		s.LabelKeys[j], s.LabelValues[j] = l.k, l.v
	}
	s.SeriesID = SeriesID(s.Name, s.LabelKeys, s.LabelValues)
	return s, nil
}

// parsePromValue reads "value [timestamp]" (and an exemplar, ignored)
// after a sample's labels into s.
func parsePromValue(s *MetricSample, rest string) error {
	rest = strings.TrimLeft(rest, " \t")
	if j := strings.Index(rest, " #"); j >= 0 { // OpenMetrics exemplar
		rest = rest[:j]
	}
	f := strings.Fields(rest)
	if len(f) == 0 || len(f) > 2 {
		return errors.New("expected value [timestamp] after the labels")
	}
	v, err := parsePromFloat(f[0])
	if err != nil {
		return err
	}
	s.Value = v
	if len(f) == 2 {
		t, err := promTimestamp(f[1])
		if err != nil {
			return err
		}
		s.TS = t
	}
	return nil
}

func parsePromFloat(v string) (float64, error) {
	switch v {
	case "NaN":
		return math.NaN(), nil
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, errors.New("bad sample value " + strconv.Quote(v))
	}
	return f, nil
}

func promTimestamp(v string) (time.Time, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n >= 1e11 || n <= -1e11 {
			return time.UnixMilli(n).UTC(), nil
		}
		return time.Unix(n, 0).UTC(), nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e11 {
		return time.Time{}, errors.New("bad timestamp " + strconv.Quote(v))
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
}

// parsePromLabels reads labels from line[i:] (just after '{') up to '}'.
// A quoted string without '=' is the metric name (OpenMetrics 2 / UTF-8).
func parsePromLabels(line string, i int) ([]promLabel, string, int, error) {
	var labels []promLabel
	qname := ""
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == ',') {
			i++
		}
		if i >= len(line) {
			return nil, "", i, errors.New("unterminated label set")
		}
		if line[i] == '}' {
			return labels, qname, i + 1, nil
		}
		var key string
		if line[i] == '"' {
			v, n, err := promQuoted(line, i)
			if err != nil {
				return nil, "", i, err
			}
			i = n
			for i < len(line) && line[i] == ' ' {
				i++
			}
			if i >= len(line) || line[i] != '=' {
				qname = v
				continue
			}
			key = v
		} else {
			j := i
			for j < len(line) && line[j] != '=' && line[j] != ' ' && line[j] != '}' && line[j] != ',' {
				j++
			}
			key = line[i:j]
			i = j
			for i < len(line) && line[i] == ' ' {
				i++
			}
			if key == "" || i >= len(line) || line[i] != '=' {
				return nil, "", i, errors.New("bad label name")
			}
		}
		i++ // '='
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i >= len(line) || line[i] != '"' {
			return nil, "", i, errors.New("label value must be quoted")
		}
		v, n, err := promQuoted(line, i)
		if err != nil {
			return nil, "", i, err
		}
		i = n
		labels = append(labels, promLabel{key, v})
	}
}

// promQuoted decodes a quoted label value at line[i] ('"'); escapes are
// \\, \" and \n.
func promQuoted(line string, i int) (string, int, error) {
	var b strings.Builder
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; c {
		case '"':
			return b.String(), j + 1, nil
		case '\\':
			if j+1 >= len(line) {
				return "", j, errors.New("unterminated label value")
			}
			j++
			switch line[j] {
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(line[j])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", len(line), errors.New("unterminated label value")
}

// SeriesID is FNV-64a over the metric name and the label pairs sorted by
// key, each part followed by a 0xff separator (0xff never occurs in
// UTF-8, so different label sets cannot collide by concatenation). keys
// must be sorted, as MetricSample's are.
func SeriesID(name string, keys, values []string) uint64 {
	h := fnv.New64a()
	sep := []byte{0xff}
	h.Write([]byte(name))
	h.Write(sep)
	for i := range keys {
		h.Write([]byte(keys[i]))
		h.Write(sep)
		if i < len(values) {
			h.Write([]byte(values[i]))
		}
		h.Write(sep)
	}
	return h.Sum64()
}
