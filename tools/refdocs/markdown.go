package main

import (
	"strings"
)

// md builds a Markdown page.
type md struct{ strings.Builder }

// line writes s and a newline.
func (b *md) line(s string) {
	b.WriteString(s)
	b.WriteByte('\n')
}

// text writes s as it is.
func (b *md) text(s string) { b.WriteString(s) }

// table writes a table with a header row; each cell is escaped for a table.
func (b *md) table(header []string, rows [][]string) {
	b.row(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	b.row(sep)
	for _, r := range rows {
		b.row(r)
	}
}

func (b *md) row(cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" ")
		b.WriteString(cell(c))
		b.WriteString(" |")
	}
	b.WriteByte('\n')
}

// cell makes s fit one table cell: one line, with its pipes escaped.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// code writes s as inline code, with a fence of backticks long enough for the backticks it
// holds.
func code(s string) string {
	if s == "" {
		return ""
	}
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// anchor returns the GitHub anchor of a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// joinOr joins items as "a, b or c".
func joinOr(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// joinAnd joins items as "a, b and c".
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
