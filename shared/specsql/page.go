package specsql

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DirVariable names the folder of the handbook pages when it is not beside the checkout.
const DirVariable = "QUEUEBOX_SPEC_DIR"

// Dir returns the folder of the handbook pages: the one that getenv(DirVariable) names, or
// shared/spec beside the checkout that holds the working directory (the checkout's parent
// folder holds shared/, as on CI and on the development machines). It fails with a message that
// says where it looked and how to point it elsewhere.
func Dir(getenv func(string) string) (string, error) {
	dir := getenv(DirVariable)
	if dir == "" {
		root, err := CheckoutRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(filepath.Dir(root), "shared", "spec")
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		abs, _ := filepath.Abs(dir)
		return "", fmt.Errorf("the handbook pages are not at %s (%v); put the handbook's shared/ folder beside the checkout, or set %s to its spec folder", abs, err, DirVariable)
	}
	return dir, nil
}

// CheckoutRoot returns the folder of the service module's go.mod, found from the working
// directory upwards (a test runs in its package's folder).
func CheckoutRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("reading the working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/alternayte/queuebox\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the checkout: no go.mod of github.com/alternayte/queuebox above the working directory")
		}
		dir = parent
	}
}

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
