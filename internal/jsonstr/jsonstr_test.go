package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// validLiterals are contents of valid JSON string literals: escapes,
// surrogate pairs and lone halves, invalid UTF-8 and plain text.
var validLiterals = []string{
	``, `plain`, `héllo 中文 😀`,
	`\"\\\/\b\f\n\r\t`, `a\nb`, `\u0041\u00e9\u4e2d`, `\u00E9\u00e9`, `a\u0000b`,
	`\ud83d\ude00`, `x\uD83D\uDE00y`,
	`\ud800`, `\udc00`, `\udc00\ud800x`, `\ud800\u0041`, `\ud800\ud800\udc00`,
	`\ud83d\n`, `\ud83d\\ude00`, `\ud83dx\ude00`,
	"a\xffb", "\xc3", "\xc3\xa9\xc3", "a\xff\\n\xc3", "\xed\xa0\x80", // invalid UTF-8
	"\xf0\x9f\x98", "\\u00e9\xfe\xff\\t",
}

// TestUnquoteReplaceMatchesEncodingJSON: without keepInvalidUTF8, Unquote
// is encoding/json's decoding of a string.
func TestUnquoteReplaceMatchesEncodingJSON(t *testing.T) {
	for _, s := range validLiterals {
		checkReplace(t, s)
	}
}

// TestUnquoteKeep: with keepInvalidUTF8 escapes decode as in
// encoding/json, and bytes outside escapes are kept as they are.
func TestUnquoteKeep(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, ``},
		{`plain`, `plain`},
		{`\"\\\/\b\f\n\r\t`, "\"\\/\b\f\n\r\t"},
		{`\u0041\u00e9\u4e2d`, "Aé中"},
		{`\ud83d\ude00`, "😀"},
		{`\ud800`, "\uFFFD"},
		{`\udc00\ud800x`, "\uFFFD\uFFFDx"},
		{`\ud800\u0041`, "\uFFFDA"},
		{`a\u0000b`, "a\x00b"},
		// Invalid UTF-8 is kept, where encoding/json would replace it.
		{"a\xff\\n\xc3", "a\xff\n\xc3"},
		{"\xff", "\xff"},
		{"\xc3\\u00e9\xc3", "\xc3é\xc3"},
		{"\xed\xa0\x80\\t", "\xed\xa0\x80\t"},
	} {
		got, ok := Unquote(c.in, true)
		if !ok || got != c.want {
			t.Errorf("Unquote(%q, true) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	// On valid UTF-8 both modes are encoding/json.
	for _, s := range validLiterals {
		if !utf8.ValidString(s) {
			continue
		}
		want := decodeJSON(t, s)
		if got, ok := Unquote(s, true); !ok || got != want {
			t.Errorf("Unquote(%q, true) = %q, %v; encoding/json %q", s, got, ok, want)
		}
	}
}

// TestUnquoteMalformed: malformed escapes are rejected in both modes.
func TestUnquoteMalformed(t *testing.T) {
	for _, s := range []string{`\`, `a\`, `\u12`, `\u12g4`, `\x`, `\a`, `\U0041`, `\ud83d\`, `\ud83d\u12`, `\ud83d\x`} {
		for _, keep := range []bool{false, true} {
			if got, ok := Unquote(s, keep); ok {
				t.Errorf("Unquote(%q, %v) = %q, accepted", s, keep, got)
			}
		}
	}
}

// TestUnquoteNoCopy: contents that decode to themselves are returned as
// they are, without allocating.
func TestUnquoteNoCopy(t *testing.T) {
	for _, c := range []struct {
		in   string
		keep bool
	}{
		{"plain ascii", false}, {"héllo 中文 😀", false},
		{"plain ascii", true}, {"héllo", true}, {"a\xffb", true},
	} {
		got, ok := Unquote(c.in, c.keep)
		if !ok || got != c.in || unsafe.StringData(got) != unsafe.StringData(c.in) {
			t.Errorf("Unquote(%q, %v) = %q, %v, copied", c.in, c.keep, got, ok)
		}
		if n := testing.AllocsPerRun(10, func() { Unquote(c.in, c.keep) }); n != 0 {
			t.Errorf("Unquote(%q, %v) allocates %v times", c.in, c.keep, n)
		}
	}
}

func TestHex4(t *testing.T) {
	for _, c := range []struct {
		in   string
		want rune
		ok   bool
	}{
		{"0041", 0x41, true}, {"00e9", 0xe9, true}, {"00E9x", 0xe9, true}, {"FFFF", 0xffff, true},
		{"D83D", 0xd83d, true}, {"", 0, false}, {"123", 0, false}, {"12g4", 0, false},
		{"+123", 0, false}, {"-123", 0, false}, {"1_23", 0, false}, {" 123", 0, false},
	} {
		got, ok := Hex4(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("Hex4(%q) = %#x, %v; want %#x, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// FuzzUnquote compares the replacing mode with encoding/json on every
// valid literal, and the keeping mode with it on valid UTF-8.
func FuzzUnquote(f *testing.F) {
	for _, s := range validLiterals {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want string
		if json.Unmarshal([]byte(`"`+s+`"`), &want) != nil {
			return
		}
		checkReplace(t, s)
		got, ok := Unquote(s, true)
		if !ok {
			t.Fatalf("Unquote(%q, true) rejects a valid literal", s)
		}
		if utf8.ValidString(s) && got != want {
			t.Fatalf("Unquote(%q, true) = %q, encoding/json %q", s, got, want)
		}
		// Keeping only differs where bytes outside escapes are invalid.
		if strings.IndexByte(s, '\\') < 0 && got != s {
			t.Fatalf("Unquote(%q, true) = %q, changed contents without escapes", s, got)
		}
	})
}

func checkReplace(t *testing.T, s string) {
	t.Helper()
	want := decodeJSON(t, s)
	if got, ok := Unquote(s, false); !ok || got != want {
		t.Errorf("Unquote(%q, false) = %q, %v; encoding/json %q", s, got, ok, want)
	}
}

func decodeJSON(t *testing.T, s string) string {
	t.Helper()
	var want string
	if err := json.Unmarshal([]byte(`"`+s+`"`), &want); err != nil {
		t.Fatalf("encoding/json rejects %q: %v", s, err)
	}
	return want
}

// BenchmarkUnquote: plain contents are the ingest path's common case and
// must not allocate; escaped ones allocate the result once.
func BenchmarkUnquote(b *testing.B) {
	for _, c := range []struct {
		name, s string
		keep    bool
	}{
		{"plain-ascii", "req-7f3a9c0e-1b2d-4e5f-8a9b-0c1d2e3f4a5b", false},
		{"plain-utf8", "prompt héllo 中文 with some ascii around it", false},
		{"escaped", `line one\nline \"two\"\t\u00e9\ud83d\ude00 and the rest of a message`, false},
		{"invalid-utf8", "bytes \xff\xfe in a message that goes on for a while", false},
		{"keep-plain", "a log line of ordinary length, with nothing to unescape in it", true},
		{"keep-escaped", "a log line\\twith \\\"quotes\\\" and \xff bytes\\n", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				Unquote(c.s, c.keep)
			}
		})
	}
}
