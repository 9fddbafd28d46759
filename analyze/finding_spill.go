package analyze

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kvtrail/kvtrail/internal/varbin"
)

// findingSpill holds findings whole in a spill on local disk, not in the
// heap, to be read back in the order added: one analyzer's findings from
// the slice that finds them to the analyzer's conclusion (concludeRun),
// and the run's victim findings from their conclusion to the
// reconstruction (heldFindings). Both grow with the window: at
// incident-2026 scale 100 the per-request analyzers find about 56,000
// (over_threshold, rejected_served and transfer_mismatch each flag every
// victim), which held whole were 66 MB of the 104 MB still live when the
// slices ended, each finding's struct, explanation and evidence.
type findingSpill struct {
	spill recordSpill
	enc   []byte
}

// add holds fs, in order after what was added before.
func (s *findingSpill) add(fs []Finding) error {
	for i := range fs {
		if err := s.put(&fs[i]); err != nil {
			return err
		}
	}
	return nil
}

// put holds f after what was added before.
func (s *findingSpill) put(f *Finding) error {
	if s.spill.name == "" {
		s.spill.name = "slice findings"
	}
	s.enc = encodeFinding(s.enc[:0], f)
	return s.spill.add(s.enc)
}

// each calls fn with the findings in the order they were added, in
// batches of at most n. fn must not keep a batch: the next one reuses it.
func (s *findingSpill) each(n int, fn func([]Finding) error) error {
	shared := interner{}
	return inBatches(n, s.spill.n, func(put func(Finding) error) error {
		return s.spill.each(func(b []byte) error {
			f, err := decodeFinding(b, shared)
			if err != nil {
				return err
			}
			return put(f)
		})
	}, fn)
}

// pick calls fn with the findings whose place in the order added keep
// accepts (0 for the first), in that order, decoding only those.
func (s *findingSpill) pick(keep func(int) bool, fn func(Finding) error) error {
	shared := interner{}
	i := -1
	return s.spill.each(func(b []byte) error {
		i++
		if !keep(i) {
			return nil
		}
		f, err := decodeFinding(b, shared)
		if err != nil {
			return err
		}
		return fn(f)
	})
}

// close drops the findings.
func (s *findingSpill) close() {
	s.spill.close()
	*s = findingSpill{}
}

// encodeFinding appends every field of f: strings length-prefixed, times
// as seconds and nanoseconds (a zero time is kept zero), lists and the
// details with their count plus one, 0 for nil, so that a finding reads
// back equal to the one written (reflect.DeepEqual), empty and nil lists
// apart.
func encodeFinding(b []byte, f *Finding) []byte {
	str := varbin.AppendString
	for _, s := range []string{f.ID, f.RunID, f.Analyzer, f.AnalyzerVersion, string(f.Severity), f.RequestKey,
		f.GatewayRequestID, f.Tenant, f.PrefillNode, f.DecodeNode, f.Title, f.Explanation, f.GroupKey, f.Subject} {
		b = str(b, s)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.Confidence))
	for _, t := range []time.Time{f.TS, f.FirstTS, f.LastTS} {
		b = binary.AppendVarint(b, t.Unix())
		b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	}
	b = binary.AppendUvarint(b, f.Room)
	b = binary.AppendVarint(b, int64(f.DecodeDPRank))
	for _, l := range [][]string{f.RIDs, f.ForeignTenants, f.ForeignRequestKeys} {
		b = appendStrs(b, l)
	}
	b = varbin.AppendListLen(b, len(f.Evidence), f.Evidence == nil)
	for _, v := range f.Evidence {
		b = binary.AppendUvarint(b, v)
	}
	b = varbin.AppendListLen(b, len(f.Details), f.Details == nil)
	keys := make([]string, 0, len(f.Details))
	for k := range f.Details {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = str(str(b, k), f.Details[k])
	}
	return b
}

func appendStrs(b []byte, l []string) []byte {
	b = varbin.AppendListLen(b, len(l), l == nil)
	for _, s := range l {
		b = varbin.AppendString(b, s)
	}
	return b
}

// interner shares the strings findings repeat (analyzer, run, severity,
// tenants, nodes, detail keys) among the findings read back: the
// victims' findings are held to the end of the reconstruction, and a
// copy of each of these per finding was 14 MB of the scale-100
// analysis's peak. It stops taking new strings past internMax, so a
// window of many distinct values costs copies, not an unbounded map.
type interner map[string]string

const internMax = 1 << 14

func (in interner) str(r *varbin.Reader) string {
	b := r.StrBytes()
	if s, ok := in[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(in) < internMax {
		in[s] = s
	}
	return s
}

// decodeFinding reads what encodeFinding wrote, sharing repeated strings
// through shared.
func decodeFinding(b []byte, shared interner) (Finding, error) {
	var f Finding
	r := varbin.NewReader(b, errSpilled)
	// In encodeFinding's order; a finding's own strings copied, the
	// repeated ones shared.
	f.ID, f.RunID, f.Analyzer, f.AnalyzerVersion = r.Str(), shared.str(r), shared.str(r), shared.str(r)
	sev := shared.str(r)
	f.RequestKey, f.GatewayRequestID = r.Str(), r.Str()
	f.Tenant, f.PrefillNode, f.DecodeNode = shared.str(r), shared.str(r), shared.str(r)
	f.Title, f.Explanation, f.GroupKey, f.Subject = r.Str(), r.Str(), r.Str(), r.Str()
	f.Severity = Severity(sev)
	var conf [8]byte
	for i := range conf {
		conf[i] = r.Byte()
	}
	f.Confidence = math.Float64frombits(binary.LittleEndian.Uint64(conf[:]))
	for _, t := range []*time.Time{&f.TS, &f.FirstTS, &f.LastTS} {
		sec, ns := r.Varint(), r.Uvarint()
		if ns >= uint64(time.Second) {
			return Finding{}, fmt.Errorf("%w: a finding's time has %d ns", errSpilled, ns)
		}
		if u := time.Unix(sec, int64(ns)).UTC(); !u.IsZero() {
			*t = u
		}
	}
	f.Room = r.Uvarint()
	f.DecodeDPRank = int16(r.Varint())
	f.RIDs = readStrs(r, nil)
	f.ForeignTenants = readStrs(r, shared)
	f.ForeignRequestKeys = readStrs(r, nil)
	if n := r.ListLen(1); n >= 0 {
		f.Evidence = make([]uint64, n)
		for i := range f.Evidence {
			f.Evidence[i] = r.Uvarint()
		}
	}
	if n := r.ListLen(2); n >= 0 {
		f.Details = make(map[string]string, n)
		for range n {
			k := shared.str(r)
			f.Details[k] = r.Str()
		}
	}
	if r.Err == nil && r.Left() > 0 {
		return Finding{}, fmt.Errorf("%w: %d bytes left over in a spilled finding", errSpilled, r.Left())
	}
	if r.Err != nil {
		return Finding{}, fmt.Errorf("read back a spilled finding: %w", r.Err)
	}
	return f, nil
}

// readStrs reads what appendStrs wrote, sharing the strings through
// shared when it is not nil.
func readStrs(r *varbin.Reader, shared interner) []string {
	n := r.ListLen(1)
	if n < 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		if shared != nil {
			l[i] = shared.str(r)
		} else {
			l[i] = r.Str()
		}
	}
	return l
}
