package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/service"
)

// confRow is one row of a key table: a key, or a key of every kind of an entry with the default
// of each kind.
type confRow struct {
	key      config.KeyDoc
	defaults []kindValue // the default of each kind, for a key of every kind
}

// kindValue is the rendered default of a key in one kind.
type kindValue struct{ kind, value string }

// configurationPage is docs/reference/configuration.md.
func configurationPage(docs *docComments) (string, error) {
	entries, keys := config.Reference(service.Components())
	lows, err := lowerBounds(entries, keys)
	if err != nil {
		return "", err
	}
	refused, err := refusedKinds(entries, keys)
	if err != nil {
		return "", err
	}
	p := &confPage{docs: docs, entries: entries, keys: keys, lows: lows, refused: refused, fieldNames: map[string]bool{}}
	for _, k := range keys {
		p.fieldNames[k.Field] = true
	}
	p.intro()
	for _, k := range keys {
		if k.Entry == "" && !strings.ContainsAny(k.Pattern, ".[") {
			if err := p.section(k); err != nil {
				return "", err
			}
		}
	}
	if len(p.problems) > 0 {
		return "", errors.Join(p.problems...)
	}
	p.b.line("## Counts")
	p.b.line("")
	p.b.line(fmt.Sprintf("This page has %d rows in %d sections, %d of them blocks that hold other keys, and %d entries with kinds. A key that each kind of an entry has is one row; a key that several kinds have with their own meaning (`timeoutMs`) has a row in each kind's table.",
		p.rows, p.sections, p.blocks, len(entries)))
	return p.b.String(), nil
}

// confPage writes the configuration page.
type confPage struct {
	b        md
	docs     *docComments
	entries  []config.EntryDoc
	keys     []config.KeyDoc
	lows     map[string]string // what the validation says of the smallest value, by key pattern and kind
	refused  map[string]string // what the validation says of a kind that it refuses, by entry pattern and kind
	rows     int
	blocks   int
	sections int
	// problems are the doc comments that a page cannot show.
	problems []error
	// fieldNames holds the Go name of every key's field, which no description may show.
	fieldNames map[string]bool
}

func (p *confPage) intro() {
	b := &p.b
	b.line("# Configuration keys")
	b.line("")
	b.text(generatedNote)
	b.line("")
	b.line("Every key of `queuebox.yml`, section by section. A destination, a source, an auth block and a")
	b.line("signing block come in several kinds: the keys that the entry sets select its kind, and each kind")
	b.line("has a table of its own after the keys that every kind shares.")
	b.line("")
	b.line("- **Key**: the path of the key. `<name>` stands for the name of a destination or a source, `[<n>]`")
	b.line("  for the position of an item in a list, counted from 0. Key names match in any letter case.")
	b.line("- **Type**: `string`, `integer`, `integer (ms)` (milliseconds), `number`, `boolean`, `duration`")
	b.line("  (a whole number and one of `s`, `m`, `h`, `d`, such as `7d`), `secret` (also read from a file")
	b.line("  with `file:/path`, and never printed), a list or map of those, or `block` for a map of keys.")
	b.line("- **Default**: the value a key has when nothing sets it; `—` when it has none. Where the")
	b.line("  default depends on something else, the description says so.")
	b.line("- **Largest**: the largest value of a numeric key; `queuebox config check` and every start refuse")
	b.line("  a larger one ([configuration-bounds.md](../configuration-bounds.md) says why each bound is")
	b.line("  what it is). The smallest values are in the descriptions.")
	b.line("- **Variable**: the environment variable that sets the key. It is `QUEUEBOX_` and the path in upper")
	b.line("  case, its levels joined by `_`; an `_` inside a name is written `__`, and a list position is its")
	b.line("  number (`routes[0].topicPattern` is `QUEUEBOX_ROUTES_0_TOPICPATTERN`). A variable wins over the")
	b.line("  file. `${NAME}` and `${NAME:-fallback}` in a value read the environment too.")
	b.line("")
}

// section writes the section of the top-level key top: its own keys, then its entries.
func (p *confPage) section(top config.KeyDoc) error {
	p.sections++
	b := &p.b
	b.line("## " + top.Pattern)
	b.line("")
	if d, err := p.description(top, ""); err != nil {
		return err
	} else if d != "" {
		b.line(d)
		b.line("")
	}
	var plain []confRow
	for _, k := range p.keys {
		if k.Entry == "" && under(k.Pattern, top.Pattern) {
			plain = append(plain, confRow{key: k})
		}
	}
	if len(plain) > 0 {
		if err := p.table(plain); err != nil {
			return err
		}
	}
	for _, e := range p.entries {
		if under(e.Pattern, top.Pattern) {
			if err := p.entry(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// under reports whether the pattern p lies below the key path top.
func under(p, top string) bool {
	return strings.HasPrefix(p, top+".") || strings.HasPrefix(p, top+"[")
}

// entry writes the keys of every kind of e, then one table per kind.
func (p *confPage) entry(e config.EntryDoc) error {
	b := &p.b
	name := displayKey(e.Pattern)
	var kinds []string
	for _, k := range e.Kinds {
		kinds = append(kinds, code(k.Name))
	}
	b.line(fmt.Sprintf("### %s: keys of every kind", code(name)))
	b.line("")
	b.line(fmt.Sprintf("%s is of one kind: %s. The keys below apply to each kind; the tables after them list the keys of one kind.",
		capitalize(article(e.Noun)), joinOr(kinds)))
	b.line("")
	if err := p.table(p.commonRows(e)); err != nil {
		return err
	}
	for _, k := range e.Kinds {
		b.line(fmt.Sprintf("### %s of kind %s", code(name), code(k.Name)))
		b.line("")
		b.line(selectedBy(e, k))
		b.line("")
		if msg, ok := p.refused[e.Pattern+" "+k.Name]; ok {
			b.line("The validation refuses this kind here: " + msg + ".")
			b.line("")
			continue
		}
		var rows []confRow
		for _, key := range p.keys {
			if key.Entry == e.Pattern && key.Kind == k.Name && !key.Common {
				rows = append(rows, confRow{key: key})
			}
		}
		if len(rows) == 0 {
			b.line("This kind has no keys of its own.")
			b.line("")
			continue
		}
		if err := p.table(rows); err != nil {
			return err
		}
	}
	return nil
}

// selectedBy says which keys select the kind k of e.
func selectedBy(e config.EntryDoc, k config.KindDoc) string {
	if k.ByType {
		return fmt.Sprintf("Only `type: %s` selects this kind (in any letter case), whatever keys the %s sets.", k.Name, strings.TrimPrefix(strings.TrimPrefix(article(e.Noun), "a "), "an "))
	}
	var req []string
	for _, r := range k.Required {
		req = append(req, code(r))
	}
	s := "the key " + req[0]
	if len(req) > 1 {
		s = "the keys " + joinAnd(req)
	}
	text := fmt.Sprintf("%s that sets %s is of this kind. The kinds are tried in the order of this page; the first whose keys are all set wins.", capitalize(article(e.Noun)), s)
	if k.Typed {
		text += fmt.Sprintf(" `type: %s` (in any letter case) selects it before the keys are looked at.", k.Name)
	}
	return text
}

// commonRows returns the keys of every kind of e, once each, with the default of each kind.
func (p *confPage) commonRows(e config.EntryDoc) []confRow {
	var rows []confRow
	index := map[string]int{}
	for _, k := range p.keys {
		if k.Entry != e.Pattern || !k.Common {
			continue
		}
		i, ok := index[k.Pattern]
		if !ok {
			i = len(rows)
			index[k.Pattern] = i
			rows = append(rows, confRow{key: k})
		}
		rows[i].defaults = append(rows[i].defaults, kindValue{k.Kind, renderDefault(k)})
	}
	return rows
}

// table writes the rows of keys.
func (p *confPage) table(rows []confRow) error {
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		k := r.key
		def := renderDefault(k)
		if len(r.defaults) > 0 {
			def = mergeDefaults(r.defaults)
		}
		desc, err := p.description(k, def)
		if err != nil {
			return err
		}
		largest := ""
		if k.Max > 0 {
			largest = code(fmt.Sprint(k.Max))
		}
		out = append(out, []string{code(displayKey(k.Pattern)), typeName(k.Type), def, p.lows[k.Pattern+" "+k.Kind], largest, envVar(k), desc})
	}
	p.rows += len(rows)
	for _, r := range rows {
		if r.key.Block {
			p.blocks++
		}
	}
	p.b.table([]string{"Key", "Type", "Default", "Smallest", "Largest", "Variable", "Description"}, out)
	p.b.line("")
	return nil
}

// mergeDefaults writes the defaults of the kinds: one value when they agree, else each value
// with its kinds.
func mergeDefaults(defs []kindValue) string {
	var order []string
	byValue := map[string][]string{}
	for _, d := range defs {
		if _, ok := byValue[d.value]; !ok {
			order = append(order, d.value)
		}
		byValue[d.value] = append(byValue[d.value], d.kind)
	}
	if len(order) == 1 {
		return order[0]
	}
	parts := make([]string, len(order))
	for i, v := range order {
		parts[i] = v + " (" + strings.Join(byValue[v], ", ") + ")"
	}
	return strings.Join(parts, "; ")
}

// description returns the doc comment of k's field, made to speak of keys.
func (p *confPage) description(k config.KeyDoc, def string) (string, error) {
	text, err := p.docs.field(k.Owner, k.Field)
	if err != nil {
		return "", err
	}
	d, err := describe(text, k, def, p.fieldNames)
	if err != nil {
		p.problems = append(p.problems, err)
	}
	return d, nil
}

// article puts "a" or "an" before a noun: an auth block, a destination.
func article(noun string) string {
	if noun != "destination" && noun != "source" {
		noun += " block"
	}
	if strings.ContainsAny(noun[:1], "aeiou") {
		return "an " + noun
	}
	return "a " + noun
}
