package parse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// CheckReport is what `kvtrail formats check` says about one source: how
// its records were classified, and the shapes of the lines that are new to
// kvtrail, so an operator sees coverage before ingesting and can send the
// unknown shapes upstream.
type CheckReport struct {
	Path     string `json:"path"`
	Detected Format `json:"detected_format"`
	Lines    int64  `json:"lines"`
	Records  int64  `json:"records"`
	StatusCounts
	Families []FamilyCounts `json:"families"`
	// Shapes groups the unknown records by shape, most frequent first
	// (at most MaxShapes groups).
	Shapes []ShapeGroup `json:"unknown_shapes"`
	// UnknownShapes is the number of distinct shapes, including those
	// beyond the MaxShapes listed.
	UnknownShapes int `json:"unknown_shape_count"`
	// Warning is set when no record was recognised at all.
	Warning string `json:"warning,omitempty"`
}

// StatusCounts counts records by parse status.
type StatusCounts struct {
	Parsed    int64 `json:"parsed"`
	Noise     int64 `json:"noise"`
	Unknown   int64 `json:"unknown"`
	Malformed int64 `json:"malformed"`
}

func (s *StatusCounts) add(st Status) {
	switch st {
	case StatusParsed:
		s.Parsed++
	case StatusNoise:
		s.Noise++
	case StatusMalformed:
		s.Malformed++
	default:
		s.Unknown++
	}
}

// FamilyCounts counts the records of one line family ("" is no known shape)
// and kind.
type FamilyCounts struct {
	Family string `json:"family"`
	Kind   Kind   `json:"kind,omitempty"`
	StatusCounts
}

// ShapeGroup is a set of unknown records with the same shape.
type ShapeGroup struct {
	Shape   string `json:"shape"`
	Count   int64  `json:"count"`
	LineNo  int64  `json:"example_line"`
	Example string `json:"example"`
}

// MaxShapes bounds the unknown shapes a report lists.
const MaxShapes = 50

// maxShapeKeys bounds the distinct shapes tracked (memory on huge inputs).
const maxShapeKeys = 10000

// Check classifies every record of r the way ingest does (Detect on the
// first DetectSampleBytes as the hint unless hint is set, then the
// Classifier) and reports the counts. It fails only on a read error.
func Check(path string, r io.Reader, hint Format, opts ParseOptions) (CheckReport, error) {
	rep := CheckReport{Path: path, Families: []FamilyCounts{}, Shapes: []ShapeGroup{}} // [] rather than null in JSON
	sample := make([]byte, DetectSampleBytes)
	n, err := io.ReadFull(r, sample)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return rep, fmt.Errorf("read %s: %w", path, err)
	}
	sample = sample[:n]
	if hint == "" || hint == "auto" {
		hint = Detect(sample)
	}
	rep.Detected = hint
	c, err := NewClassifier(hint, opts)
	if err != nil {
		return rep, err
	}
	rd := NewReader(io.MultiReader(bytes.NewReader(sample), r), ReaderOptions{SingleLine: SingleLine(hint)})
	fams := map[[2]string]*FamilyCounts{}
	shapes := map[string]*ShapeGroup{}
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("read %s: %w", path, err)
		}
		p := c.Parse(rec)
		rep.Records++
		rep.Lines += int64(rec.Lines)
		rep.StatusCounts.add(p.Status)
		key := [2]string{p.Family, string(p.Kind)}
		fc := fams[key]
		if fc == nil {
			fc = &FamilyCounts{Family: p.Family, Kind: p.Kind}
			fams[key] = fc
		}
		fc.add(p.Status)
		if p.Status != StatusUnknown {
			continue
		}
		line := firstLine(rec.Raw)
		sh := Shape(line)
		g := shapes[sh]
		if g == nil {
			rep.UnknownShapes++
			if len(shapes) >= maxShapeKeys {
				continue
			}
			g = &ShapeGroup{Shape: sh, LineNo: rec.LineNo, Example: clipRunes(line, 300)}
			shapes[sh] = g
		}
		g.Count++
	}
	for _, fc := range fams {
		rep.Families = append(rep.Families, *fc)
	}
	sort.Slice(rep.Families, func(i, j int) bool {
		a, b := rep.Families[i], rep.Families[j]
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		return a.Kind < b.Kind
	})
	for _, g := range shapes {
		rep.Shapes = append(rep.Shapes, *g)
	}
	sort.Slice(rep.Shapes, func(i, j int) bool {
		a, b := rep.Shapes[i], rep.Shapes[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.LineNo < b.LineNo
	})
	if len(rep.Shapes) > MaxShapes {
		rep.Shapes = rep.Shapes[:MaxShapes]
	}
	if rep.Records > 0 && rep.Parsed+rep.Noise+rep.Malformed == 0 {
		rep.Warning = "no line recognised; ingest keeps every line as unknown evidence"
	}
	return rep, nil
}

// Shape reduces a line to its form: digit runs become N, hex literals 0xH,
// quoted strings '…', runs of spaces one space; at most 120 characters.
// Lines that differ only in values share a shape.
func Shape(line string) string {
	var b strings.Builder
	for i := 0; i < len(line) && b.Len() < 120; {
		c := line[i]
		switch {
		case c == '0' && i+1 < len(line) && (line[i+1] == 'x' || line[i+1] == 'X'):
			j := i + 2
			for j < len(line) && isHex(line[j]) {
				j++
			}
			b.WriteString("0xH")
			i = j
		case c >= '0' && c <= '9':
			for i < len(line) && line[i] >= '0' && line[i] <= '9' {
				i++
			}
			b.WriteByte('N')
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 || j > 200 {
				b.WriteByte(c)
				i++
				continue
			}
			b.WriteString("'…'")
			i += j + 2
		case c == ' ' || c == '\t':
			for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
				i++
			}
			b.WriteByte(' ')
		default:
			r, size := utf8.DecodeRuneInString(line[i:])
			b.WriteRune(r)
			i += size
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
