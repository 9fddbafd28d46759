package parse

import (
	"errors"
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
	block  []MetricSample // see one
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
	// The line is read through a view of rec.Raw: a repeated series (the
	// bulk of a snapshot file) keeps nothing of the line, so only a new
	// series or TYPE entry copies what it keeps.
	line := strings.TrimSpace(strings.TrimSuffix(bytesView(rec.Raw), "\r"))
	switch {
	case line == "":
		return unknown("empty line")
	case line == "# EOF":
		return Parsed{Status: StatusParsed, Kind: KindMarker, Event: "eof"}
	case strings.HasPrefix(line, "#"):
		var f [4]string
		n := fieldsN(line, f[:])
		if n >= 3 {
			var event string
			switch f[1] {
			case "HELP":
				event = "help"
			case "TYPE":
				event = "type"
			case "UNIT":
				event = "unit"
			}
			if event != "" {
				if event == "type" && n >= 4 && len(p.types) < maxPromTypes {
					if old, ok := p.types[f[2]]; !ok || old != f[3] {
						p.types[strings.Clone(f[2])] = strings.Clone(f[3])
					}
				}
				return Parsed{Status: StatusParsed, Kind: KindMetricMeta, Event: event}
			}
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
		line = strings.Clone(line) // the name and labels are kept
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
	return Parsed{Status: StatusParsed, Kind: KindMetric, Event: "sample", TS: s.TS, Metrics: p.one(s)}
}

// one returns s as a one-sample slice carved from a block shared by the
// next samples, so a sample line costs no allocation of its own. The
// slice's capacity is one: appending to it cannot reach a neighbour.
func (p *promParser) one(s MetricSample) []MetricSample {
	if len(p.block) == 0 {
		p.block = make([]MetricSample, promBlock)
	}
	out := p.block[:1:1]
	out[0] = s
	p.block = p.block[1:]
	return out
}

// promBlock samples are allocated at once: small enough that a block kept
// alive by one row of an ingest batch costs little.
const promBlock = 64

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
	var f [3]string
	n := fieldsN(rest, f[:])
	if n == 0 || n > 2 {
		return errors.New("expected value [timestamp] after the labels")
	}
	v, err := parsePromFloat(f[0])
	if err != nil {
		return err
	}
	s.Value = v
	if n == 2 {
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

// promCheck reports whether parsePromSample would accept line, without
// allocating: the classifier asks it of every line of a metrics source
// before the parser reads the line again. It follows parsePromSample step
// by step (TestPromCheckMatchesParse holds them together).
func promCheck(line string) bool {
	i := 0
	for i < len(line) && (isIdent(line[i]) || line[i] == ':') && line[i] != '.' {
		i++
	}
	named := i > 0
	if i < len(line) && line[i] == '{' {
		end, qnamed, ok := promLabelsEnd(line, i+1)
		if !ok {
			return false
		}
		i = end
		if !named {
			named = qnamed
		}
	}
	if !named {
		return false
	}
	rest := strings.TrimLeft(line[i:], " \t")
	if j := strings.Index(rest, " #"); j >= 0 {
		rest = rest[:j]
	}
	var f [3]string
	n := fieldsN(rest, f[:])
	if n == 0 || n > 2 {
		return false
	}
	if _, ok := promFloatOK(f[0]); !ok {
		return false
	}
	if n == 2 {
		if _, err := promTimestamp(f[1]); err != nil {
			return false
		}
	}
	return true
}

// promFloatOK is parsePromFloat without the error value.
func promFloatOK(v string) (float64, bool) {
	switch v {
	case "NaN":
		return math.NaN(), true
	case "+Inf", "Inf":
		return math.Inf(1), true
	case "-Inf":
		return math.Inf(-1), true
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

// promLabelsEnd is parsePromLabels without building the labels: the index
// after the closing '}', and whether the last quoted name is non-empty.
func promLabelsEnd(line string, i int) (int, bool, bool) {
	qnamed := false
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == ',') {
			i++
		}
		if i >= len(line) {
			return i, false, false
		}
		if line[i] == '}' {
			return i + 1, qnamed, true
		}
		if line[i] == '"' {
			n, ok := promQuotedEnd(line, i)
			if !ok {
				return i, false, false
			}
			empty := n == i+2
			i = n
			for i < len(line) && line[i] == ' ' {
				i++
			}
			if i >= len(line) || line[i] != '=' {
				qnamed = !empty
				continue
			}
		} else {
			j := i
			for j < len(line) && line[j] != '=' && line[j] != ' ' && line[j] != '}' && line[j] != ',' {
				j++
			}
			empty := j == i
			i = j
			for i < len(line) && line[i] == ' ' {
				i++
			}
			if empty || i >= len(line) || line[i] != '=' {
				return i, false, false
			}
		}
		i++ // '='
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i >= len(line) || line[i] != '"' {
			return i, false, false
		}
		n, ok := promQuotedEnd(line, i)
		if !ok {
			return i, false, false
		}
		i = n
	}
}

// promQuotedEnd returns the index after the quoted value at line[i], as
// promQuoted reads it.
func promQuotedEnd(line string, i int) (int, bool) {
	for j := i + 1; j < len(line); j++ {
		switch line[j] {
		case '"':
			return j + 1, true
		case '\\':
			if j+1 >= len(line) {
				return j, false
			}
			j++
		}
	}
	return len(line), false
}

// promQuoted decodes a quoted label value at line[i] ('"'); escapes are
// \\, \" and \n.
func promQuoted(line string, i int) (string, int, error) {
	// Most values have no escape: the value is then a substring.
	for j := i + 1; j < len(line) && line[j] != '\\'; j++ {
		if line[j] == '"' {
			return line[i+1 : j], j + 1, nil
		}
	}
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
	// FNV-64a written out (hash/fnv through its interface allocates, and
	// this runs for every new series).
	h := uint64(fnvOffset64)
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= fnvPrime64
		}
	}
	sep := func() {
		h ^= 0xff
		h *= fnvPrime64
	}
	add(name)
	sep()
	for i := range keys {
		add(keys[i])
		sep()
		if i < len(values) {
			add(values[i])
		}
		sep()
	}
	return h
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)
