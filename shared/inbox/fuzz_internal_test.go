package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// pathSeeds are the paths of the documentation, of the configuration's definiteness test and
// of the refusal test, and a few odd spellings.
var pathSeeds = []string{
	"$", "$.id", "$.type", "$.data.object.id", "$.data.object.customer", "$['a b']", `$["x"]`, "$[0]", "$[-1]", "$.a[2].b",
	"$.a[-1].b", "$.a[ 2 ].b", `$['it\'s']`, "$.x-id", "$.1st", `$.a\b`, "$.missing.deeper", "$.event.id",
	"", "id", "$..id", "$.*", "$[*]", "$.a[*]", "$[?(@.a)]", "$[?@.a]", "$[0,1]", "$[0:2]", "$['a','b']", "$.", "$[",
	"$['a'", "$.a()", "$ .a", "$.a..b", "$[01]", "$[-0]", "$['\\u0041']", "$.é", "$[\"a\\\"b\"]", "$.a\x01b",
}

// docSeeds are documents for the path seeds.
var docSeeds = []string{
	`{"id":"a","data":{"object":{"customer":"c","id":"o1"}},"a b":1,"x":2,"a":[0,1,{"b":"deep"}],"it's":3,"x-id":"hy","1st":"digit","a\\b":"slash"}`,
	`{"id":12345678901234567890,"type":"order.created","event":{"id":{"z":1,"a":[true,null]}}}`,
	`[1,2,3]`, `"text"`, `null`, `{"id":null}`, `{"id":""}`, `{"é":"accent","A":"\u0041"}`, `{"id":"x","id":"y"}`,
}

// FuzzJSONPath compiles any path and looks it up in any document. A path that does not start
// with $ is refused, and a refused path is never looked up; the error names the path. A path
// that compiles selects at most one value, the same one every time, and its text follows the
// documented rules (a string as its text, a number digit for digit, an object or an array as
// JSON). A path in the plain subset ($ then .name, ['name'] and [index] steps) must compile
// and find what a walk of the decoded document finds.
func FuzzJSONPath(f *testing.F) {
	for i, p := range pathSeeds {
		f.Add(p, []byte(docSeeds[i%len(docSeeds)]))
	}
	f.Add("$"+strings.Repeat(".a", 2000), []byte(strings.Repeat(`{"a":`, 900)+"1"+strings.Repeat("}", 900)))
	f.Add("$"+strings.Repeat("[0]", 2000), []byte(strings.Repeat(`[`, 1000)+strings.Repeat("]", 1000)))
	f.Fuzz(func(t *testing.T, raw string, body []byte) {
		if len(raw) > 1<<14 {
			return // the configuration holds short paths; keep the parser's input bounded
		}
		p, err := compilePath(raw)
		steps, plain := plainPath(raw)
		if err != nil {
			if plain {
				t.Fatalf("compilePath(%q) refused a plain path: %v", raw, err)
			}
			if !strings.Contains(err.Error(), strconv.Quote(raw)) || !strings.Contains(err.Error(), "definite") {
				t.Fatalf("compilePath(%q): the error %q does not name the path and the rule", raw, err)
			}
			return
		}
		if !strings.HasPrefix(raw, "$") {
			t.Fatalf("compilePath(%q) accepted a path that does not start with $", raw)
		}
		if p.raw != raw {
			t.Fatalf("compilePath(%q) kept %q as the path", raw, p.raw)
		}
		doc, ok := referenceParseJSON(body)
		if !ok {
			return
		}
		got, found := p.lookup(body)
		if want, wantFound := referenceLookup(t, raw, doc); got != want || found != wantFound {
			t.Fatalf("path %q in %s: got %q/%v, decoding and selecting gives %q/%v", raw, body, got, found, want, wantFound)
		}
		if again, foundAgain := p.lookup(body); again != got || foundAgain != found {
			t.Fatalf("path %q: the lookup is not deterministic: %q/%v then %q/%v", raw, got, found, again, foundAgain)
		}
		if !found && got != "" {
			t.Fatalf("path %q: no value, but the text %q", raw, got)
		}
		if plain {
			want, wantFound := walk(doc, steps)
			if wantFound != found {
				t.Fatalf("path %q in %s: found = %v, a walk of the document says %v (%q)", raw, body, found, wantFound, got)
			}
			if found {
				checkText(t, raw, got, want)
			}
		}
	})
}

// step is one step of a plain path: a member name or an array index.
type step struct {
	name    string
	index   int
	isIndex bool
}

// plainPath parses the plain subset of the definite paths: $ followed by .name steps (a name
// of valid UTF-8 without . [ * ? ( ) @ , : ' " space or tab), ['name'] steps (a name without
// quote, backslash or control character) and [index] steps (an integer of at most 9 digits,
// without a leading zero, negative counting from the end).
func plainPath(raw string) ([]step, bool) {
	if !strings.HasPrefix(raw, "$") || !utf8.ValidString(raw) {
		return nil, false
	}
	var steps []step
	for s := raw[1:]; s != ""; {
		switch {
		case s[0] == '.':
			end := strings.IndexAny(s[1:], ".[")
			if end < 0 {
				end = len(s) - 1
			}
			name := s[1 : 1+end]
			if name == "" || strings.ContainsAny(name, "*?()@,:'\" \t") {
				return nil, false
			}
			steps = append(steps, step{name: name})
			s = s[1+end:]
		case strings.HasPrefix(s, "['"):
			end := strings.Index(s[2:], "']")
			if end < 0 {
				return nil, false
			}
			name := s[2 : 2+end]
			if strings.ContainsAny(name, `'\`) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 }) {
				return nil, false
			}
			steps = append(steps, step{name: name})
			s = s[2+end+2:]
		case s[0] == '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, false
			}
			digits := strings.TrimPrefix(s[1:end], "-")
			if digits == "" || len(digits) > 9 || strings.Trim(digits, "0123456789") != "" ||
				(digits[0] == '0' && (len(digits) > 1 || s[1] == '-')) {
				return nil, false
			}
			n, _ := strconv.Atoi(s[1:end])
			steps = append(steps, step{index: n, isIndex: true})
			s = s[end+1:]
		default:
			return nil, false
		}
	}
	return steps, true
}

// walk follows the steps through a decoded document. null is no value.
func walk(v any, steps []step) (any, bool) {
	for _, st := range steps {
		if st.isIndex {
			a, ok := v.([]any)
			if !ok {
				return nil, false
			}
			i := st.index
			if i < 0 {
				i += len(a)
			}
			if i < 0 || i >= len(a) {
				return nil, false
			}
			v = a[i]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[st.name]; !ok {
			return nil, false
		}
	}
	return v, v != nil
}

// checkText checks the text of a found value against the decoded value.
func checkText(t *testing.T, raw, got string, want any) {
	t.Helper()
	switch w := want.(type) {
	case string:
		if got != w {
			t.Fatalf("path %q: got %q, want the string %q", raw, got, w)
		}
	case json.Number:
		if got != w.String() {
			t.Fatalf("path %q: got %q, want the number %s as written", raw, got, w)
		}
	case bool:
		if got != strconv.FormatBool(w) {
			t.Fatalf("path %q: got %q, want %v", raw, got, w)
		}
	default:
		back, ok := referenceParseJSON([]byte(got))
		if !ok || !reflect.DeepEqual(back, want) {
			t.Fatalf("path %q: got %q, which is not the JSON of %#v", raw, got, want)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(got)); err != nil || compact.String() != got {
			t.Fatalf("path %q: got %q, which is not compact JSON", raw, got)
		}
	}
}

// FuzzParseJSON checks the body check against encoding/json: it accepts exactly one valid
// JSON document of UTF-8 text nested at most MaxNestingDepth deep, as the decoding that it
// replaced did (referenceParseJSON). tooDeep agrees with the depth that a token walk measures, for any limit.
func FuzzParseJSON(f *testing.F) {
	for _, d := range docSeeds {
		f.Add([]byte(d), uint16(3))
	}
	for _, s := range []string{``, ` `, `{} {}`, `{}x`, "\xff", `"\xff"`, `[1,2`, `{"a":"[[[[\"[["}`, `{"a":"\\",  "b":[[[[]]]]}`,
		`1e400`, `"\u0000"`, `"\ud800"`, "{}\n\t ", `[[[]]]`, `-0`, `01`} {
		f.Add([]byte(s), uint16(2))
	}
	f.Add([]byte(strings.Repeat("[", MaxNestingDepth)+strings.Repeat("]", MaxNestingDepth)), uint16(MaxNestingDepth))
	f.Add([]byte(strings.Repeat("[", MaxNestingDepth+1)+strings.Repeat("]", MaxNestingDepth+1)), uint16(MaxNestingDepth))
	f.Add([]byte(strings.Repeat(`{"a":`, 5000)), uint16(10))
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		depth, valid := referenceDepth(body)
		ok := parseJSON(body)
		wantOK := valid && utf8.Valid(body) && depth <= MaxNestingDepth
		if ok != wantOK {
			t.Fatalf("parseJSON(%q) = %v, want %v (valid %v, depth %d)", body, ok, wantOK, valid, depth)
		}
		if _, refOK := referenceParseJSON(body); ok != refOK {
			t.Fatalf("parseJSON(%q) = %v, but decoding it says %v", body, ok, refOK)
		}
		if valid {
			if got := tooDeep(body, int(limit)); got != (depth > int(limit)) {
				t.Fatalf("tooDeep(%q, %d) = %v, but the depth is %d", body, limit, got, depth)
			}
		}
	})
}

// referenceDepth returns the deepest nesting of a valid JSON text, measured by encoding/json's
// tokens, and whether the text is one valid JSON document.
func referenceDepth(body []byte) (int, bool) {
	if !json.Valid(body) {
		return 0, false
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	depth, deepest := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return deepest, true
		}
		if err != nil {
			return 0, false
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// TestTooDeepDoesNotAllocate: a hostile body (a megabyte of brackets) is refused by one pass
// over it, before the decoder allocates anything.
// It does not run in parallel, because AllocsPerRun may not.
func TestTooDeepDoesNotAllocate(t *testing.T) {
	body := bytes.Repeat([]byte("["), 1<<20)
	if !tooDeep(body, MaxNestingDepth) {
		t.Fatal("a megabyte of [ is not too deep")
	}
	if n := testing.AllocsPerRun(5, func() { parseJSON(body) }); n != 0 {
		t.Fatalf("parseJSON of a megabyte of [ allocated %v times, want 0", n)
	}
}

// FuzzCorrelationAndHeaders checks the cleaning of a correlation identifier and the header
// map of the headers column. CleanCorrelationID keeps UTF-8 text without control characters
// of at most 128 UTF-16 code units, is idempotent, and keeps the longest prefix of the input's
// kept characters that fits. requestHeaders keeps one value per lower-case name, the last one,
// a name without NUL; encodeHeaders writes what encoding/json writes for that map with each
// value as StoredHeaderValue makes it, which holds no NUL and no byte that is not UTF-8.
func FuzzCorrelationAndHeaders(f *testing.F) {
	f.Add("3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10", "X-Request-Id", "v", "w")
	f.Add("a\r\nb", "x-correlation-id", "a\x00b", "")
	f.Add("id", "\x00", "v", "w")
	f.Add("id", "X-A\x00b", "v", "w")
	f.Add(strings.Repeat("é", 200), "Content-Type", "application/json", "text/plain")
	f.Add(strings.Repeat("😀", 100), "X-Ünïcode", "\xff\xfe", "<html>&")
	f.Add("\x00\x1f\x7f\u0080\u009f", "", "\u2028", "\"\\")
	f.Add(strings.Repeat("a", 127)+"😀", "HOST", "example.com", "evil.com")
	f.Fuzz(func(t *testing.T, id, name, value1, value2 string) {
		checkCorrelationID(t, id)

		r := &http.Request{Host: "example.com", Header: http.Header{}}
		r.Header[name] = []string{value1, value2}
		r.Header["X-Correlation-Id"] = []string{id}
		m := requestHeaders(r)
		for k, v := range m {
			if k != strings.ToLower(k) {
				t.Fatalf("header name %q is not lower case", k)
			}
			if strings.IndexByte(k, 0) >= 0 {
				t.Fatalf("header name %q keeps a NUL", k)
			}
			if s := StoredHeaderValue(v); strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
				t.Fatalf("header %q is stored as %q", k, s)
			}
		}
		key := strings.ToLower(strings.ReplaceAll(name, "\x00", ""))
		if key != "x-correlation-id" && key != "host" && m[key] != value2 {
			t.Fatalf("header %q = %q, want the last value %q", name, m[key], value2)
		}
		got, err := encodeHeaders(m)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceJSON(t, storedForm(m)); string(got) != want {
			t.Fatalf("encodeHeaders(%q) = %s, want %s", m, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("encodeHeaders(%q) = %s, which is not JSON", m, got)
		}
		if body := errorBody(value1); !json.Valid(body) {
			t.Fatalf("errorBody(%q) = %s, which is not JSON", value1, body)
		}
	})
}

// checkCorrelationID checks the properties of CleanCorrelationID for one input.
func checkCorrelationID(t *testing.T, id string) {
	t.Helper()
	got := CleanCorrelationID(id)
	if !utf8.ValidString(got) {
		t.Fatalf("CleanCorrelationID(%q) = %q, which is not UTF-8", id, got)
	}
	if n := len(utf16.Encode([]rune(got))); n > MaxCorrelationIDLength {
		t.Fatalf("CleanCorrelationID(%q) = %q, %d UTF-16 code units", id, got, n)
	}
	if strings.ContainsFunc(got, unicode.IsControl) {
		t.Fatalf("CleanCorrelationID(%q) = %q, which holds a control character", id, got)
	}
	if again := CleanCorrelationID(got); again != got {
		t.Fatalf("CleanCorrelationID is not idempotent: %q, then %q", got, again)
	}
	// The kept characters of the input, in order.
	var kept []rune
	for i := 0; i < len(id); {
		r, size := utf8.DecodeRuneInString(id[i:])
		i += size
		if (r == utf8.RuneError && size == 1) || unicode.IsControl(r) {
			continue
		}
		kept = append(kept, r)
	}
	units := 0
	for i, r := range kept {
		units += utf16.RuneLen(r)
		if units > MaxCorrelationIDLength {
			kept = kept[:i]
			break
		}
	}
	if want := string(kept); got != want {
		t.Fatalf("CleanCorrelationID(%q) = %q, want %q", id, got, want)
	}
}
