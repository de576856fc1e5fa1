package redact

import (
	"encoding/json"
	"math/rand"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// corpusPath is the shared corpus, which the pull-client libraries run as well.
const corpusPath = "../../testdata/redaction/corpus.json"

type corpusCase struct {
	Name  string `json:"name"`
	Input string `json:"input"`
	Want  string `json:"want"`
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	raw, err := os.ReadFile(corpusPath)
	if err != nil {
		t.Fatalf("reading the corpus: %v", err)
	}
	var cases []corpusCase
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cases); err != nil {
		t.Fatalf("decoding the corpus: %v", err)
	}
	return cases
}

func TestCorpus(t *testing.T) {
	t.Parallel()
	cases := loadCorpus(t)
	if len(cases) < 60 {
		t.Fatalf("corpus has %d cases, want at least 60", len(cases))
	}
	seen := make(map[string]bool, len(cases))
	for _, tc := range cases {
		if tc.Name == "" || seen[tc.Name] {
			t.Fatalf("corpus case name %q is empty or repeated", tc.Name)
		}
		seen[tc.Name] = true
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			if got := String(tc.Input); got != tc.Want {
				t.Errorf("String(%q)\n got: %q\nwant: %q", abbreviate(tc.Input), abbreviate(got), abbreviate(tc.Want))
			}
		})
	}
}

// TestCorpusIsIdempotent checks that redacting a result again changes nothing, so that text
// which passes through two redacting layers (an error logged by a handler) reads the same.
func TestCorpusIsIdempotent(t *testing.T) {
	t.Parallel()
	for _, tc := range loadCorpus(t) {
		if strings.HasSuffix(tc.Want, truncationMarker) {
			continue // a cut can split a redaction marker; the length still holds
		}
		if got := String(tc.Want); got != tc.Want {
			t.Errorf("%s: String(want) = %q, want it unchanged %q", tc.Name, abbreviate(got), abbreviate(tc.Want))
		}
	}
}

// TestEveryKeyAndForm redacts each COMPAT key in each of its separator spellings, in each
// notation, and checks that the value is gone and the key stays as written.
func TestEveryKeyAndForm(t *testing.T) {
	t.Parallel()
	const value = "Sup3rS3cret"
	notations := []struct {
		name, format, want string
	}{
		{"equals", "x KEY=" + value + " y", "x KEY=" + redacted + " y"},
		{"spaced equals", "x KEY = " + value + " y", "x KEY = " + redacted + " y"},
		{"colon", "x KEY: " + value + ", y", "x KEY: " + redacted + ", y"},
		{"JSON", `{"KEY":"` + value + `","y":1}`, `{"KEY":"` + redacted + `","y":1}`},
		{"single quotes", `{'KEY': '` + value + `'}`, `{'KEY': '` + redacted + `'}`},
		{"quoted equals", `"KEY" = "` + value + `"`, `"KEY" = "` + redacted + `"`},
		{"prefixed", "x db_KEY=" + value + " y", "x db_KEY=" + redacted + " y"},
		{"upper case", "x " + "UPPERKEY=" + value, "x UPPERKEY=" + redacted},
	}
	for _, key := range secretKeys {
		for _, spelling := range spellings(key) {
			for _, n := range notations {
				k := spelling
				if n.name == "upper case" {
					k = strings.ToUpper(spelling)
					n.format = strings.ReplaceAll(n.format, "UPPERKEY", "KEY")
					n.want = strings.ReplaceAll(n.want, "UPPERKEY", "KEY")
				}
				in := strings.ReplaceAll(n.format, "KEY", k)
				want := strings.ReplaceAll(n.want, "KEY", k)
				if got := String(in); got != want {
					t.Errorf("key %q, %s: String(%q) = %q, want %q", key, n.name, in, got, want)
				}
			}
			// The key followed by more word characters is another word.
			in := spelling + "less=" + value
			if got := String(in); got != in {
				t.Errorf("key %q: String(%q) = %q, want it unchanged", key, in, got)
			}
		}
	}
}

// spellings returns key with every separator between its words written as "-", "_", "." and
// nothing.
func spellings(key string) []string {
	words := strings.FieldsFunc(key, func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	if len(words) == 1 {
		return words
	}
	var out []string
	for _, sep := range []string{"-", "_", ".", ""} {
		out = append(out, strings.Join(words, sep))
	}
	return out
}

func TestLength(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        string
		wantRunes int
		wantCut   bool
	}{
		{name: "empty", in: "", wantRunes: 0},
		{name: "at the limit", in: strings.Repeat("z", MaxLength), wantRunes: MaxLength},
		{name: "one over the limit", in: strings.Repeat("z", MaxLength+1), wantRunes: MaxLength, wantCut: true},
		{name: "far over the input limit", in: strings.Repeat("z", 100_000), wantRunes: MaxLength, wantCut: true},
		{name: "three-byte runes", in: strings.Repeat("語", 5000), wantRunes: MaxLength, wantCut: true},
		{name: "invalid UTF-8 counts a byte as a character", in: strings.Repeat("\xff", MaxLength+1), wantRunes: MaxLength, wantCut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := String(tt.in)
			if n := utf8.RuneCountInString(got); n != tt.wantRunes {
				t.Errorf("length %d characters, want %d", n, tt.wantRunes)
			}
			if cut := strings.HasSuffix(got, truncationMarker); cut != tt.wantCut {
				t.Errorf("ends in the marker: %v, want %v", cut, tt.wantCut)
			}
		})
	}
}

func TestConstants(t *testing.T) {
	t.Parallel()
	if MaxLength != 2000 || MaxInput != 2512 {
		t.Fatalf("MaxLength, MaxInput = %d, %d; COMPAT says 2000, 2512", MaxLength, MaxInput)
	}
	if n := utf8.RuneCountInString(truncationMarker); n != 14 {
		t.Fatalf("marker has %d characters", n)
	}
}

// FuzzString checks the properties that hold for every input: no panic, at most MaxLength
// characters, the same result as the reference expressions, and a secret value of a plain
// pair never survives.
func FuzzString(f *testing.F) {
	for _, tc := range loadCorpus(f) {
		f.Add(tc.Input)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		if n := utf8.RuneCountInString(got); n > MaxLength {
			t.Fatalf("String returned %d characters", n)
		}
		if want := referenceString(s); got != want {
			t.Fatalf("String(%q) = %q, reference gives %q", s, got, want)
		}
		probe := s + " password=Zq9xLeak"
		if utf8.RuneCountInString(probe) <= MaxInput && strings.Contains(String(probe), "Zq9xLeak") {
			t.Fatalf("the value of password= survived in %q", String(probe))
		}
	})
}

// abbreviate shortens long strings in failure messages.
func abbreviate(s string) string {
	if utf8.RuneCountInString(s) <= 200 {
		return s
	}
	r := []rune(s)
	return string(r[:90]) + "…(" + itoa(len(r)) + " characters)…" + string(r[len(r)-90:])
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestMatchesReference checks that running the rules at candidate positions finds exactly
// the matches that the unanchored expressions find.
func TestMatchesReference(t *testing.T) {
	t.Parallel()
	inputs := []string{
		"a=b password=x:token: y password: z", "x-x-api-key=1 my-x-api-key=2 -password=3",
		`"pass" "password" = 'x' password"=x password "=x`, "::==::password==x", "token=password=x",
		"1abc://u:p@h 9+x://u:p@h a.b-c://u:p@h ://u:p@h", "http://a@b://c:d@e",
		"xBearer abc123 Bearer Bearer abc123 Token = x TOKEN abcdefghijklmnopq",
		"??token=a&&pwd=b?password=&secret=c", "dtoken=1 _token=2 9token=3",
	}
	for _, tc := range loadCorpus(t) {
		inputs = append(inputs, tc.Input)
	}
	for _, in := range inputs {
		if got, want := String(in), referenceString(in); got != want {
			t.Errorf("String(%q)\n got: %q\nwant: %q (reference)", abbreviate(in), abbreviate(got), abbreviate(want))
		}
	}
}

// TestRandomTextMatchesReference compares String with the reference expressions on text
// built at random from the pieces that the rules care about. The seed is fixed, so a failure
// repeats.
func TestRandomTextMatchesReference(t *testing.T) {
	t.Parallel()
	pieces := []string{"password", "pwd", "x-api-key", "Token", "token", "bearer", "Basic", "=", ":",
		" ", "\t", "\n", "\r", "\v", `"`, "'", `\`, "[REDACTED]", "abc", "123", "==", "@", "://",
		"postgres", "/", "?", "&", "#", ",", ";", "}", "]", "é", "ſ", "_", "-", ".", "\xff",
		"a1b2c3d4e5f6g7h8", "***"}
	r := rand.New(rand.NewSource(20261130))
	for range 5000 {
		var b strings.Builder
		for k := r.Intn(40); k > 0; k-- {
			b.WriteString(pieces[r.Intn(len(pieces))])
		}
		in := b.String()
		if got, want := String(in), referenceString(in); got != want {
			t.Fatalf("String(%q)\n got: %q\nwant: %q (reference)", in, got, want)
		}
	}
}
