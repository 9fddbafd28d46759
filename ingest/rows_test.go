package ingest

import (
	"io/fs"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/migrations"
)

// sortRows gives the order a full sort by (node, second, line id) gives,
// keeping the rows of equal keys (one record's) in their order, whatever
// shape the input has.
func TestSortRowsEqualsAFullStableSort(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	type row struct {
		node string
		ts   time.Time
		id   uint64
		seq  int // input position, to check stability
	}
	inTimeOrder := func(n, perSecond int) []row {
		rows := make([]row, n)
		for i := range rows {
			rows[i] = row{"decode-0", t0.Add(time.Duration(i/perSecond)*time.Second + time.Duration(i%perSecond)*time.Millisecond), rng.Uint64(), 0}
		}
		return rows
	}
	tests := []struct {
		name string
		rows []row
	}{
		{"empty", nil},
		{"one second per line", inTimeOrder(500, 1)},
		{"seven lines a second", inTimeOrder(5000, 7)},
		{"one long second", inTimeOrder(3000, 3000)},
		{"time going back", func() []row {
			r := inTimeOrder(2000, 5)
			slices.Reverse(r[700:900])
			return r
		}()},
		{"two nodes interleaved (a push batch)", func() []row {
			r := inTimeOrder(3000, 4)
			for i := range r {
				if i%3 == 0 {
					r[i].node = "prefill-0"
				}
			}
			return r
		}()},
		{"records with several rows", func() []row {
			r := inTimeOrder(3000, 6)
			for i := 1; i < len(r); i += 4 {
				r[i].id = r[i-1].id // two messages of one line
			}
			return r
		}()},
		{"before 1970 and after 2105 (clamped)", func() []row {
			r := inTimeOrder(300, 3)
			r[10].ts = time.Unix(-5000, 0)
			r[11].ts = time.Unix(-10, 0)
			r[200].ts = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
			return r
		}()},
	}
	key := func(r *row) rowKey { return rowKey{r.node, dateTime(r.ts), r.id} }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.rows {
				tt.rows[i].seq = i
			}
			want := slices.Clone(tt.rows)
			slices.SortStableFunc(want, func(a, b row) int {
				ka, kb := key(&a), key(&b)
				switch {
				case ka.less(kb):
					return -1
				case kb.less(ka):
					return 1
				}
				return 0
			})
			got := slices.Clone(tt.rows)
			sortRows(got, key)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("row %d: %+v, a full stable sort gives %+v", i, got[i], want[i])
				}
			}
		})
	}
}

// A batch is cut before a record that opens a new second once it is full,
// and at twice its bounds whatever the times.
func TestCutBefore(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	fill := func(n, bytes int, last time.Time) *Batch {
		b := &Batch{raw: make([]rawRow, n), bytes: bytes}
		if n > 0 {
			b.raw[n-1].ts = last
		}
		return b
	}
	tests := []struct {
		name string
		b    *Batch
		ts   time.Time
		want bool
	}{
		{"empty", fill(0, 0, t0), t0.Add(time.Hour), false},
		{"not full", fill(chunkRecords-1, 0, t0), t0.Add(time.Second), false},
		{"full, same second", fill(chunkRecords, 0, t0), t0.Add(999 * time.Millisecond), false},
		{"full, next second", fill(chunkRecords, 0, t0.Add(999*time.Millisecond)), t0.Add(time.Second), true},
		{"full, time went back", fill(chunkRecords, 0, t0), t0.Add(-time.Second), true},
		{"full of text, next second", fill(10, chunkBytes, t0), t0.Add(time.Second), true},
		{"twice full, same second", fill(2*chunkRecords, 0, t0), t0, true},
		{"twice the text, same second", fill(10, 2*chunkBytes, t0), t0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.cutBefore(tt.ts); got != tt.want {
				t.Fatalf("cutBefore = %v, want %v", got, tt.want)
			}
		})
	}
}

// keyOrdered names exactly the tables the migrations order by (node, ts,
// line_id), the key sortByKey sorts by: a table added with that order, or
// one whose order changes, fails here until the two agree.
func TestKeyOrderedTablesMatchTheSchema(t *testing.T) {
	create := regexp.MustCompile(`CREATE TABLE IF NOT EXISTS \{\{table "(\w+)"\}\}`)
	order := regexp.MustCompile(`(?m)^ORDER BY (.+)$`)
	modify := regexp.MustCompile(`ALTER TABLE \{\{table "(\w+)"\}\}.* MODIFY ORDER BY (\(.+\));`)
	byKey := map[string]bool{}
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := fs.ReadFile(migrations.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		sql := string(b)
		for _, m := range create.FindAllStringSubmatchIndex(sql, -1) {
			table := sql[m[2]:m[3]]
			o := order.FindStringSubmatch(sql[m[1]:])
			if o == nil {
				continue
			}
			byKey[table] = strings.TrimSpace(o[1]) == "(node, ts, line_id)"
		}
		// A later ALTER may extend a key by a column the rows of one
		// record keep in order (msg_index, 0017).
		for _, m := range modify.FindAllStringSubmatch(sql, -1) {
			k := strings.TrimSpace(m[2])
			byKey[m[1]] = k == "(node, ts, line_id)" || k == "(node, ts, line_id, msg_index)"
		}
	}
	for table := range keyOrdered {
		if !byKey[table] {
			t.Errorf("keyOrdered names %s, which the migrations do not order by (node, ts, line_id)", table)
		}
	}
	for table, ok := range byKey {
		if ok && !keyOrdered[table] {
			t.Errorf("the migrations order %s by (node, ts, line_id) but keyOrdered does not name it", table)
		}
	}
}
