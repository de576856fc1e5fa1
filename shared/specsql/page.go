package specsql

import (
	"regexp"
	"strings"
)

var fence = regexp.MustCompile("(?s)```([a-zA-Z0-9_+-]*)[ \t]*\n(.*?)\n```")

// Block is one fenced code block of a page.
type Block struct {
	// Lang is the info string of the fence: sql, bash, yaml, text, ... (empty when none).
	Lang string
	// Text is the block's content, trimmed.
	Text string
}

// Fenced returns every fenced code block of a page, in page order, so that a test can pair a
// command block with the output block that follows it.
func Fenced(page string) []Block {
	var out []Block
	for _, m := range fence.FindAllStringSubmatch(page, -1) {
		out = append(out, Block{Lang: m[1], Text: strings.TrimSpace(m[2])})
	}
	return out
}

// Blocks returns the text of every fenced code block of a page whose info string is lang
// (sql, bash, yaml, text, ...), in page order. The pages of the handbook may hold a block
// collapsed onto one line; Squeeze and, for shell, Commands read such blocks.
func Blocks(page, lang string) []string {
	var out []string
	for _, b := range Fenced(page) {
		if b.Lang == lang {
			out = append(out, b.Text)
		}
	}
	return out
}

// Squeeze collapses every run of white space into one space, so that a block compares equal
// whether or not its line breaks survived.
func Squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }
