// Package docs checks the Markdown files of the repository: every relative link points at a
// file or folder inside the repository, and every anchor at a heading of its page, so that
// the documentation works for anyone who takes the repository alone.
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// skipDirs are the folders that hold no documentation of the repository's own.
var skipDirs = map[string]bool{".git": true, "node_modules": true, "bin": true, "dist": true, "vendor": true, "testdata": true}

// inlineLink matches [text](target) and ![alt](target); target ends at the first space or ).
var inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// refLink matches a reference definition: [label]: target.
var refLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)

// TestRelativeLinksStayInTheRepository walks every .md file and checks each relative link:
// the file or folder exists inside the repository, and an anchor names a heading of the page.
func TestRelativeLinksStayInTheRepository(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		pages++
		for _, l := range links(t, path) {
			if problem := checkLink(root, path, l.target); problem != "" {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: the link %s %s", filepath.ToSlash(rel), l.line, l.target, problem)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pages < 20 {
		t.Fatalf("found %d Markdown files; the repository has more", pages)
	}
}

// link is one link target of a page, with its line.
type link struct {
	target string
	line   int
}

// links returns the link targets of the Markdown file at path, leaving out fenced code blocks
// and inline code.
func links(t *testing.T, path string) []link {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []link
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		line = stripInlineCode(line)
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{target: m[1], line: n})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			out = append(out, link{target: m[1], line: n})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

// stripInlineCode blanks the code spans of a line, whose brackets are not links.
func stripInlineCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			b.WriteRune(' ')
			continue
		}
		if in {
			b.WriteRune(' ')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// checkLink returns what is wrong with the target of a link on page, or "".
func checkLink(root, page, target string) string {
	if isExternal(target) {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	dest := page
	if file != "" {
		if strings.HasPrefix(file, "/") {
			return "is absolute: use a path relative to the page"
		}
		dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
		rel, err := filepath.Rel(root, dest)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "leaves the repository"
		}
		info, err := os.Stat(dest)
		if err != nil {
			return "points at nothing"
		}
		if info.IsDir() {
			if anchor != "" {
				return "has an anchor on a folder"
			}
			return ""
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	if !anchorsOf(dest)[anchor] {
		return "names the anchor #" + anchor + ", which no heading of " + filepath.Base(dest) + " has"
	}
	return ""
}

// isExternal reports whether target is a URL with a scheme (https:, mailto:, ...).
func isExternal(target string) bool {
	i := strings.Index(target, ":")
	if i <= 0 {
		return false
	}
	for _, r := range target[:i] {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '+' && r != '-' && r != '.' {
			return false
		}
	}
	return true
}

// anchorsOf returns the anchors of the headings of a Markdown page, as GitHub makes them:
// lower case, punctuation dropped, spaces to hyphens, a repeat suffixed -1, -2, ...; and the
// explicit <a id="..."> and <a name="..."> anchors.
func anchorsOf(page string) map[string]bool {
	data, err := os.ReadFile(page)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugOf(text)
		if n := seen[slug]; n > 0 {
			out[slug+"-"+itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// htmlAnchor matches an explicit anchor of a page.
var htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)

// slugOf is GitHub's anchor of a heading text.
func slugOf(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
