package specsql

import (
	"fmt"
	"regexp"
	"strings"
)

// Command is one shell command of a bash block.
type Command struct {
	// Line is the command as written, without its line continuations (`\` and the break after
	// it) and without its here-document body.
	Line string
	// Heredoc is the body of the command's here-document, white space squeezed (the page lost
	// its line breaks); empty when the command has none.
	Heredoc string
	// Tag is the here-document's delimiter word (SQL, YAML); empty when there is none.
	Tag string
}

// Script renders the command as a shell script: the line, and the here-document's body and
// delimiter on lines of their own. A body whose line breaks matter (YAML) is rebuilt by the
// caller before it renders.
func (c Command) Script() string {
	if c.Tag == "" {
		return c.Line + "\n"
	}
	return c.Line + "\n" + c.Heredoc + "\n" + c.Tag + "\n"
}

// programs are the names that start a command in the handbook's shell blocks. On a page whose
// line breaks are lost, `git clone URL cd queuebox docker compose up` is three commands: a
// program name starts a new one, except as the argument of `docker compose exec SERVICE` or
// after a `&&`, `|` or `;`.
var programs = map[string]bool{
	"git": true, "cd": true, "docker": true, "curl": true, "cat": true, "mkdir": true,
	"go": true, "npm": true, "npx": true, "node": true, "dotnet": true, "psql": true,
	"make": true, "createdb": true,
}

var heredocStart = regexp.MustCompile(`^<<-?'?"?([A-Za-z_][A-Za-z0-9_]*)'?"?$`)

// Commands splits a bash block into its commands. It reads blocks whose line breaks are lost as
// well as intact ones: a line continuation (`\` before a space or a line break) joins, a
// here-document runs from its `<<'TAG'` to the word TAG, and a program name of the handbook's
// commands (git, cd, docker, curl, psql, go, npm, ...) starts a new command.
func Commands(block string) ([]Command, error) {
	toks, err := shellTokens(block)
	if err != nil {
		return nil, err
	}
	var sp splitter
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		if tok == `\` {
			continue // a line continuation whose break was lost
		}
		if m := heredocStart.FindStringSubmatch(tok); m != nil {
			if i, err = sp.heredoc(toks, i, m[1]); err != nil {
				return nil, err
			}
			continue
		}
		sp.word(tok)
	}
	sp.flush()
	return sp.out, nil
}

// splitter gathers the words of the command being read (cur) and the commands read so far.
// inExec is set inside `docker ... exec`, whose first program name belongs to it
// (execProgram once taken).
type splitter struct {
	out                 []Command
	cur                 []string
	inExec, execProgram bool
}

// flush ends the current command.
func (sp *splitter) flush() {
	if len(sp.cur) > 0 {
		sp.out = append(sp.out, Command{Line: strings.Join(sp.cur, " ")})
	}
	sp.cur, sp.inExec, sp.execProgram = nil, false, false
}

// heredoc ends the current command with the here-document that opens at toks[i] and runs to
// the word tag; it returns the index of that word.
func (sp *splitter) heredoc(toks []string, i int, tag string) (int, error) {
	j := i + 1
	for j < len(toks) && toks[j] != tag {
		j++
	}
	if j == len(toks) {
		return 0, fmt.Errorf("the here-document %s has no closing %s", toks[i], tag)
	}
	sp.cur = append(sp.cur, toks[i])
	sp.out = append(sp.out, Command{Line: strings.Join(sp.cur, " "), Heredoc: strings.Join(toks[i+1:j], " "), Tag: tag})
	sp.cur, sp.inExec, sp.execProgram = nil, false, false
	return j, nil
}

// word adds tok to the current command, first ending it when tok is a program name that
// neither an operator (&&, |, ||, ;) nor a `docker exec` joins to it.
func (sp *splitter) word(tok string) {
	if programs[tok] && len(sp.cur) > 0 {
		prev := sp.cur[len(sp.cur)-1]
		joined := prev == "&&" || prev == "|" || prev == "||" || strings.HasSuffix(prev, ";")
		absorbed := sp.inExec && !sp.execProgram
		if absorbed {
			sp.execProgram = true
		}
		if !joined && !absorbed {
			sp.flush()
		}
	}
	if tok == "exec" && len(sp.cur) > 1 && sp.cur[0] == "docker" {
		sp.inExec = true
	}
	sp.cur = append(sp.cur, tok)
}

// shellTokens splits text at white space outside quotes; quotes stay in the tokens.
func shellTokens(text string) ([]string, error) {
	var toks []string
	var b strings.Builder
	quote := byte(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			b.WriteByte(c)
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
			b.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if b.Len() > 0 {
				toks = append(toks, b.String())
				b.Reset()
			}
		default:
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("an unterminated %c quote in %q", quote, Squeeze(text))
	}
	if b.Len() > 0 {
		toks = append(toks, b.String())
	}
	return toks, nil
}
