package config

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// nodeKind is the kind of a node of the generic configuration tree.
type nodeKind int

const (
	nullNode nodeKind = iota
	scalarNode
	mapNode
	listNode
)

// String names the kind for a problem: "a value", "a map", "a list" or "empty".
func (k nodeKind) String() string {
	switch k {
	case scalarNode:
		return "a value"
	case mapNode:
		return "a map"
	case listNode:
		return "a list"
	}
	return "empty"
}

// node is one node of the generic tree that the YAML file and the variables build before it is
// decoded into Config. It remembers where it came from, so that a problem can say so.
type node struct {
	kind    nodeKind
	value   string   // the text of a scalar
	line    int      // the line in the file, 0 when a variable made the node
	env     string   // the variable that made the node, empty for a node of the file
	entries []*entry // the entries of a map, in order
	items   []*node  // the items of a list
}

// entry is one key of a map node.
type entry struct {
	key string
	val *node
}

// lookup returns the first entry whose key equals key in any letter case.
func (n *node) lookup(key string) *entry {
	for _, e := range n.entries {
		if strings.EqualFold(e.key, key) {
			return e
		}
	}
	return nil
}

// has reports whether the map sets key, in any letter case, to something other than null.
func (n *node) has(key string) bool {
	e := n.lookup(key)
	return e != nil && e.val.kind != nullNode
}

// origin says where the node came from, for a problem or a warning.
func (n *node) origin(file string) string {
	switch {
	case n.env != "":
		return "set by " + n.env
	case n.line > 0 && file != "":
		return fmt.Sprintf("%s line %d", file, n.line)
	case n.line > 0:
		return fmt.Sprintf("line %d", n.line)
	}
	return ""
}

// Bounds on the expansion of YAML aliases, against alias bombs: how deep aliases may nest, and
// how many nodes a document may expand to.
const (
	maxAliasDepth = 64
	maxTreeNodes  = 1 << 20
)

// converter turns a yaml.Node into a tree, counting the nodes it makes.
type converter struct {
	nodes int
}

// parseYAML parses one YAML document into a tree. An empty document gives an empty map.
func parseYAML(data []byte) (*node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &node{kind: mapNode}, nil
	}
	root, err := (&converter{}).fromYAML(doc.Content[0], 0)
	if err != nil {
		return nil, err
	}
	switch root.kind {
	case nullNode:
		return &node{kind: mapNode}, nil
	case mapNode:
		return root, nil
	}
	return nil, fmt.Errorf("line %d: the top level must be a map of sections, not %s", root.line, root.kind)
}

// yamlErrorLine rewrites a syntax error of yaml.v3, whose line is often the start of the
// enclosing block or one off, to name the first line at which the document fails with the same
// problem. Other errors stay as they are.
func yamlErrorLine(data []byte, err error) error {
	problem, ok := yamlProblem(err)
	if !ok {
		return err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for k := 1; k <= len(lines); k++ {
		var doc yaml.Node
		perr := yaml.Unmarshal(bytes.Join(lines[:k], nil), &doc)
		if p, ok := yamlProblem(perr); ok && p == problem {
			return fmt.Errorf("line %d: %s", k, problem)
		}
	}
	return err
}

// yamlProblem returns the problem of a yaml.v3 syntax error without its "yaml: line N: " prefix.
func yamlProblem(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg, ok := strings.CutPrefix(err.Error(), "yaml: ")
	if !ok {
		return "", false
	}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if _, after, found := strings.Cut(rest, ": "); found {
			msg = after
		}
	}
	return msg, true
}

func (c *converter) fromYAML(y *yaml.Node, depth int) (*node, error) {
	if depth > maxAliasDepth {
		return nil, fmt.Errorf("line %d: aliases nest too deep", y.Line)
	}
	if c.nodes++; c.nodes > maxTreeNodes {
		return nil, fmt.Errorf("line %d: aliases expand the document to more than %d nodes", y.Line, maxTreeNodes)
	}
	switch y.Kind {
	case yaml.AliasNode:
		return c.fromYAML(y.Alias, depth+1)
	case yaml.ScalarNode:
		if y.Tag == "!!null" {
			return &node{kind: nullNode, line: y.Line}, nil
		}
		return &node{kind: scalarNode, value: y.Value, line: y.Line}, nil
	case yaml.SequenceNode:
		n := &node{kind: listNode, line: y.Line}
		for _, child := range y.Content {
			item, err := c.fromYAML(child, depth)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, item)
		}
		return n, nil
	case yaml.MappingNode:
		return c.mapFromYAML(y, depth)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", y.Line)
}

func (c *converter) mapFromYAML(y *yaml.Node, depth int) (*node, error) {
	n := &node{kind: mapNode, line: y.Line}
	var merges []*yaml.Node
	for i := 0; i+1 < len(y.Content); i += 2 {
		k, v := y.Content[i], y.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: a key must be a plain name", k.Line)
		}
		if k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		for _, e := range n.entries {
			if e.key == k.Value {
				return nil, fmt.Errorf("line %d: key %q is set twice", k.Line, k.Value)
			}
		}
		val, err := c.fromYAML(v, depth)
		if err != nil {
			return nil, err
		}
		if val.line == 0 || val.kind == mapNode || val.kind == listNode {
			val.line = k.Line // a problem with a map or a list names the line of its key
		}
		n.entries = append(n.entries, &entry{key: k.Value, val: val})
	}
	// A merge key (<<) adds the keys of the merged maps that the map does not set itself.
	for _, m := range merges {
		src, err := c.fromYAML(m, depth+1)
		if err != nil {
			return nil, err
		}
		maps := []*node{src}
		if src.kind == listNode {
			maps = src.items
		}
		for _, s := range maps {
			if s.kind != mapNode {
				return nil, fmt.Errorf("line %d: a merge key (<<) must name a map", m.Line)
			}
			for _, e := range s.entries {
				if n.lookupExact(e.key) == nil {
					n.entries = append(n.entries, e)
				}
			}
		}
	}
	return n, nil
}

func (n *node) lookupExact(key string) *entry {
	for _, e := range n.entries {
		if e.key == key {
			return e
		}
	}
	return nil
}

// maxEnvListIndex bounds a list index in a variable name, so that a typo cannot allocate a huge
// list.
const maxEnvListIndex = 9999

// overlayEnv writes the QUEUEBOX_ variables onto the tree, key by key inside maps. The first
// variable that touches a list of the file replaces that list whole with a new list built from
// variables. vars maps each variable name to its value; the variables apply in name order.
// It returns warnings for the variables that cannot apply.
func overlayEnv(root *node, vars map[string]string) []Warning {
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names)
	var warnings []Warning
	for _, name := range names {
		path, ok := envKeyPath(name)
		if !ok {
			warnings = append(warnings, Warning{Key: "", Origin: "set by " + name,
				Message: fmt.Sprintf("%s names no key path (an empty level); it has no effect", name)})
			continue
		}
		if err := setEnv(root, path, name, vars[name]); err != nil {
			warnings = append(warnings, Warning{Key: path.String(), Origin: "set by " + name,
				Message: fmt.Sprintf("%s sets %s, which %v; it has no effect", name, path, err)})
		}
	}
	return warnings
}

// setEnv sets the scalar at path to value, making the maps and lists on the way.
func setEnv(root *node, path keyPath, name, value string) error {
	cur := root
	for i, seg := range path {
		last := i == len(path)-1
		var next *node
		if !last {
			next = newEnvContainer(path[i+1], name)
		} else {
			next = &node{kind: scalarNode, value: value, env: name}
		}
		child, err := cur.envChild(seg, next, last, name)
		if err != nil {
			return err
		}
		cur = child
	}
	return nil
}

func newEnvContainer(nextSeg, name string) *node {
	if isIndexSegment(nextSeg) {
		return &node{kind: listNode, env: name}
	}
	return &node{kind: mapNode, env: name}
}

// envChild returns the child seg of n for a variable, making it from fresh when it is absent,
// null, or (for the last level) replacing it. A list of the file is replaced by fresh before a
// variable touches it.
func (n *node) envChild(seg string, fresh *node, last bool, name string) (*node, error) {
	switch n.kind {
	case mapNode:
		e := n.lookup(seg)
		if e == nil {
			e = &entry{key: seg, val: fresh}
			n.entries = append(n.entries, e)
			return fresh, nil
		}
		e.val = envReplace(e.val, fresh, last)
		if e.val.kind == scalarNode && !last {
			return nil, fmt.Errorf("is inside the value of %s, not a map or a list", seg)
		}
		return e.val, nil
	case listNode:
		if !isIndexSegment(seg) {
			return nil, fmt.Errorf("is a list, so %q is not an index", seg)
		}
		i, err := strconv.Atoi(seg[1 : len(seg)-1])
		if err != nil || i > maxEnvListIndex {
			return nil, fmt.Errorf("has a list index above %d", maxEnvListIndex)
		}
		for len(n.items) <= i {
			n.items = append(n.items, &node{kind: nullNode, env: name})
		}
		n.items[i] = envReplace(n.items[i], fresh, last)
		if n.items[i].kind == scalarNode && !last {
			return nil, fmt.Errorf("is inside the value of %s, not a map or a list", seg)
		}
		return n.items[i], nil
	}
	return nil, fmt.Errorf("is inside %s, not a map or a list", n.kind)
}

// envReplace decides what a variable does to an existing node: the last level replaces it; a
// null or a list of the file is replaced by a fresh container; anything else stays.
func envReplace(old, fresh *node, last bool) *node {
	switch {
	case last:
		return fresh
	case old.kind == nullNode:
		return fresh
	case old.kind == listNode && old.env == "" && fresh.kind == listNode:
		return fresh
	}
	return old
}
