package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/alternayte/queuebox/shared/cli"
)

// command is one command of the help text.
type command struct {
	synopsis    string // queuebox dead show <id> [--json]
	description string
}

// helpText returns what `queuebox help` prints.
func helpText() (string, error) {
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), []string{"help"}, cli.Env{Stdout: &out, Stderr: &errOut})
	if code != cli.ExitOK {
		return "", fmt.Errorf("queuebox help exited with %d: %s", code, errOut.String())
	}
	return out.String(), nil
}

// cliPage is docs/reference/cli.md, from the help text of the command line.
func cliPage() (string, error) {
	help, err := helpText()
	if err != nil {
		return "", err
	}
	cmds, rest, err := parseHelp(help)
	if err != nil {
		return "", err
	}
	var b md
	b.line("# Command line")
	b.line("")
	b.text(generatedNote)
	b.line("")
	b.line("The commands and flags of the `queuebox` binary, from the text that `queuebox help` prints (also")
	b.line("`queuebox --help`, and `--help` or `-h` after a command). A flag takes its value after a space or")
	b.line("after `=` (`--limit 100`, `--limit=100`); a flag marked repeatable may be given more than once.")
	b.line("")
	rows := make([][]string, 0, len(cmds))
	for _, c := range cmds {
		rows = append(rows, []string{code(c.synopsis), c.description})
	}
	b.table([]string{"Command", "What it does"}, rows)
	b.line("")
	headings := map[string]bool{}
	for _, c := range cmds {
		heading := commandName(c.synopsis)
		if headings[heading] {
			heading = strings.NewReplacer("[", "", "]", "").Replace(c.synopsis)
		}
		headings[heading] = true
		writeCommand(&b, heading, c)
	}
	b.line("## Configuration and exit codes")
	b.line("")
	b.line(strings.Join(strings.Fields(rest), " "))
	b.line("")
	b.line("## The help text")
	b.line("")
	b.line("```text")
	b.text(help)
	b.line("```")
	b.line("")
	b.line(fmt.Sprintf("This page lists %d commands.", len(cmds)))
	return b.String(), nil
}

// flagToken finds a flag of a synopsis: [--table outbox|inbox], [--id ID]..., --baseline <N>.
var flagToken = regexp.MustCompile(`\[?(--[\w-]+)(?: ([^\]\s]+))?\]?(\.\.\.)?`)

// argToken finds an argument of a synopsis: <name>, <id>.
var argToken = regexp.MustCompile(`(?:^| )(<\w+>)`)

// writeCommand writes the section of one command, with its arguments and flags.
func writeCommand(b *md, heading string, c command) {
	b.line("## " + code(heading))
	b.line("")
	b.line("```sh")
	b.line(c.synopsis)
	b.line("```")
	b.line("")
	b.line(capitalize(c.description) + ".")
	b.line("")
	var rows [][]string
	withoutFlags := flagToken.ReplaceAllString(c.synopsis, "")
	for _, m := range argToken.FindAllStringSubmatch(withoutFlags, -1) {
		rows = append(rows, []string{code(m[1]), "argument", ""})
	}
	for _, m := range flagToken.FindAllStringSubmatch(c.synopsis, -1) {
		value := strings.Trim(m[2], "<>")
		kind := "flag"
		if value != "" {
			kind = "flag with a value: " + code(value)
		}
		repeat := ""
		if m[3] != "" {
			repeat = "repeatable"
		}
		rows = append(rows, []string{code(m[1]), kind, repeat})
	}
	if len(rows) > 0 {
		b.table([]string{"Argument or flag", "Takes", "Repeatable"}, rows)
		b.line("")
	}
}

// commandName returns the words of a synopsis before its first flag or argument.
func commandName(synopsis string) string {
	var words []string
	for _, w := range strings.Fields(synopsis) {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[--") || strings.HasPrefix(w, "<") {
			break
		}
		words = append(words, strings.Trim(w, "[]"))
	}
	return strings.Join(words, " ")
}

// parseHelp splits the help text into its commands and the text after them. A command starts
// at a line "  queuebox ..."; its description starts at the column of the first command's
// description, and a line indented less continues its synopsis.
func parseHelp(help string) ([]command, string, error) {
	lines := strings.Split(help, "\n")
	descCol := -1
	var cmds []command
	i := 0
	for ; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "  queuebox "):
			syn, desc := splitAt(line, &descCol)
			cmds = append(cmds, command{synopsis: syn, description: desc})
		case len(cmds) > 0 && strings.HasPrefix(line, "   "):
			c := &cmds[len(cmds)-1]
			indent := len(line) - len(strings.TrimLeft(line, " "))
			text := strings.TrimSpace(line)
			if descCol > 0 && indent >= descCol {
				c.description = strings.TrimSpace(c.description + " " + text)
			} else {
				c.synopsis += " " + text
			}
		case len(cmds) > 0 && strings.TrimSpace(line) == "":
			return cmds, strings.Join(lines[i+1:], "\n"), nil
		}
	}
	if len(cmds) == 0 {
		return nil, "", fmt.Errorf("the help text lists no command")
	}
	return cmds, "", nil
}

// splitAt splits a command line into its synopsis and description, at the description column
// (which the first line that has both sets).
func splitAt(line string, descCol *int) (string, string) {
	if *descCol < 0 {
		if i := strings.Index(line[2:], "   "); i >= 0 {
			j := 2 + i + len(line[2+i:]) - len(strings.TrimLeft(line[2+i:], " "))
			*descCol = j
		}
	}
	if *descCol > 0 && len(line) > *descCol && line[*descCol-1] == ' ' && line[*descCol] != ' ' {
		return strings.TrimSpace(line[:*descCol]), strings.TrimSpace(line[*descCol:])
	}
	return strings.TrimSpace(line), ""
}
