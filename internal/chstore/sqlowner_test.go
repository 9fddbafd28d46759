package chstore

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// SQL text lives in this package only (issue 13): every other package
// states what it needs as a small interface that *Store implements. This
// test reads every non-test Go file of the module and fails on each string
// literal (or constant concatenation) that is SQL outside internal/chstore.
//
// sqlOwnerPending are the directories whose SQL is still being moved here.
// Remove an entry once its SQL has moved: the test fails on an entry whose
// directory no longer holds any, so the list only shrinks.
var sqlOwnerPending = map[string]string{}

// sqlOwnerHome is the one directory SQL may live in.
const sqlOwnerHome = "internal/chstore"

// sqlOwnerPatterns recognise a statement by its upper-case keywords (how
// kvtrail spells SQL); prose in lower case or sentence case is not SQL.
var sqlOwnerPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\bSELECT\b.*\bFROM\b`),
	regexp.MustCompile(`\bINSERT INTO\b`),
	regexp.MustCompile(`\bALTER TABLE\b`),
	regexp.MustCompile(`\bCREATE (TABLE|DATABASE|VIEW|MATERIALIZED VIEW|DICTIONARY)\b`),
	regexp.MustCompile(`\bDROP (TABLE|DATABASE|VIEW|DICTIONARY)\b`),
	regexp.MustCompile(`\bRENAME TABLE\b`),
	regexp.MustCompile(`\bOPTIMIZE TABLE\b`),
	regexp.MustCompile(`\bTRUNCATE TABLE\b`),
	regexp.MustCompile(`\bSYSTEM (DROP|FLUSH|RELOAD|SYNC|STOP|START)\b`),
	regexp.MustCompile(`\bEXISTS TABLE\b`),
	regexp.MustCompile(`\bSHOW (TABLES|DATABASES|CREATE)\b`),
	regexp.MustCompile(`\bKILL QUERY\b`),
}

var sqlOwnerSpace = regexp.MustCompile(`\s+`)

// sqlOwnerIsSQL reports whether s reads as SQL.
func sqlOwnerIsSQL(s string) bool {
	s = sqlOwnerSpace.ReplaceAllString(s, " ")
	for _, re := range sqlOwnerPatterns {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// sqlOwnerHit is one SQL text in a source file.
type sqlOwnerHit struct {
	Line int
	Text string
}

// sqlOwnerFind returns the SQL texts of one Go source: string literals, and
// concatenations with a string literal in them, checked as a whole (the
// other operands read as "?"), so "INSERT INTO " + t + " SELECT ..." is
// found once, at its first line.
func sqlOwnerFind(fset *token.FileSet, f *ast.File) []sqlOwnerHit {
	var hits []sqlOwnerHit
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BinaryExpr:
			if x.Op != token.ADD {
				return true
			}
			parts := sqlOwnerFlatten(x)
			var text strings.Builder
			hasLit := false
			for _, p := range parts {
				if s, ok := sqlOwnerString(p); ok {
					hasLit = true
					text.WriteString(s)
				} else {
					text.WriteString("?")
				}
			}
			if !hasLit {
				return true
			}
			if sqlOwnerIsSQL(text.String()) {
				hits = append(hits, sqlOwnerHit{fset.Position(x.Pos()).Line, text.String()})
			}
			// Literals inside other operands (a call's arguments) are
			// checked on their own.
			for _, p := range parts {
				if _, ok := sqlOwnerString(p); !ok {
					ast.Inspect(p, visit)
				}
			}
			return false
		case *ast.BasicLit:
			if s, ok := sqlOwnerString(x); ok && sqlOwnerIsSQL(s) {
				hits = append(hits, sqlOwnerHit{fset.Position(x.Pos()).Line, s})
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	return hits
}

// sqlOwnerFlatten lists the operands of a chain of + in order.
func sqlOwnerFlatten(e ast.Expr) []ast.Expr {
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.ADD {
		return append(sqlOwnerFlatten(b.X), sqlOwnerFlatten(b.Y)...)
	}
	if p, ok := e.(*ast.ParenExpr); ok {
		return sqlOwnerFlatten(p.X)
	}
	return []ast.Expr{e}
}

// sqlOwnerString is the value of a string literal.
func sqlOwnerString(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// sqlOwnerModuleRoot is the directory holding go.mod, above the test's.
func sqlOwnerModuleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// sqlOwnerScan returns, per directory relative to root (slash-separated),
// the SQL found in its non-test Go files as "file:line: text".
func sqlOwnerScan(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// Hidden directories (.git, .cache), testdata and what npm
			// or the build fetched hold no kvtrail code.
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, h := range sqlOwnerFind(fset, f) {
			text := sqlOwnerSpace.ReplaceAllString(h.Text, " ")
			if len(text) > 80 {
				text = text[:80] + "..."
			}
			out[dir] = append(out[dir], fmt.Sprintf("%s:%d: %s", rel, h.Line, text))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSQLOnlyInChstore: no SQL outside internal/chstore but in the
// directories still being moved, and each of those still has some.
func TestSQLOnlyInChstore(t *testing.T) {
	found := sqlOwnerScan(t, sqlOwnerModuleRoot(t))
	if len(found[sqlOwnerHome]) == 0 {
		t.Fatalf("no SQL found in %s: the detector is broken", sqlOwnerHome)
	}
	var outside []string
	for dir, hits := range found {
		if dir == sqlOwnerHome {
			continue
		}
		if _, pending := sqlOwnerPending[dir]; pending {
			continue
		}
		outside = append(outside, hits...)
	}
	sort.Strings(outside)
	if len(outside) > 0 {
		t.Errorf("SQL outside %s (move it into a method there, called through an interface of the consumer):\n  %s",
			sqlOwnerHome, strings.Join(outside, "\n  "))
	}
	var moved []string
	for dir := range sqlOwnerPending {
		if len(found[dir]) == 0 {
			moved = append(moved, dir)
		}
	}
	slices.Sort(moved)
	for _, dir := range moved {
		t.Errorf("%s holds no SQL any more: remove it from sqlOwnerPending", dir)
	}
}

// The detector on small sources: what is SQL is found at its line, once;
// prose, identifiers and lower-case text are not.
func TestSQLOwnerDetector(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []int // lines with SQL
	}{
		{"select from", "const q = `SELECT a, b\nFROM t WHERE x = ?`", []int{3}},
		{"insert column list", `var s = "INSERT INTO raw_lines (ts, line)"`, []int{3}},
		{"insert select", "func f() { exec(`INSERT INTO ingest_steps (step)\n SELECT ?`) }", []int{3}},
		{"alter", `var s = "ALTER TABLE findings ADD COLUMN x UInt8"`, []int{3}},
		{"create table", `var s = "CREATE TABLE IF NOT EXISTS t (a UInt8) ENGINE = Log"`, []int{3}},
		{"create database", `func f(db string) string { return "CREATE DATABASE IF NOT EXISTS " + db }`, []int{3}},
		{"drop table concatenated", `func f(t string) string { return "DROP TABLE " + t }`, []int{3}},
		{"optimize", `var s = "OPTIMIZE TABLE findings FINAL"`, []int{3}},
		{"system", `var s = []string{"SYSTEM DROP MARK CACHE", "SYSTEM FLUSH LOGS"}`, []int{3, 3}},
		{"truncate", `func f(t string) string { return "TRUNCATE TABLE " + t }`, []int{3}},
		{"exists and show", "var a = \"EXISTS TABLE t\"\nvar b = \"SHOW TABLES\"", []int{3, 4}},
		{"select split over a concatenation", `func f(t string) string { return "SELECT count() " + "FROM " + t }`, []int{3}},
		{"literal inside a call in a concatenation", `func f(t string) string { return t + g("SELECT 1 FROM x") }`, []int{3}},
		{"a concatenation is one hit", `func f(t, c string) string { return "INSERT INTO " + t + " SELECT * FROM " + c }`, []int{3}},
		{"prose", `var s = "select the rows from the file"`, nil},
		{"help text in sentence case", `var s = "Select a node from the list; insert into the form"`, nil},
		{"select without from", `var s = "SELECT toUInt8(1)"`, nil},
		{"column names", "var cols = `ts ts_ns node role line_id`", nil},
		{"identifiers", `var s = "insert_into"; var t = "SELECTED FROMAGE"`, nil},
		{"comment", "// SELECT a FROM t\nvar x = 1", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", "package x\n\n"+c.src+"\n", parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, h := range sqlOwnerFind(fset, f) {
				got = append(got, h.Line)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("SQL at lines %v, want %v", got, c.want)
			}
		})
	}
}
