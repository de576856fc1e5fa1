package architecture

import (
	"cmp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// cycles returns one cycle of each group of folders that import each other (a strongly
// connected component of more than one folder): the shortest cycle through the group's first
// folder in name order, starting there. Its order is stable from run to run.
func (g graph) cycles() [][]string {
	var found [][]string
	for _, group := range g.cycleGroups() {
		found = append(found, g.shortestCycle(group[0], group))
	}
	return found
}

// cycleGroups returns the groups of more than one folder that import each other.
func (g graph) cycleGroups() [][]string {
	var found [][]string
	for _, group := range g.groups() {
		if len(group) > 1 {
			found = append(found, group)
		}
	}
	return found
}

// groups returns the strongly connected components of g (Tarjan's algorithm), each sorted
// by name, in the order of their first folder.
func (g graph) groups() [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var groups [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack, onStack[v] = append(stack, v), true
		for _, w := range sortedKeys(g[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var group []string
		for {
			w := stack[len(stack)-1]
			stack, onStack[w] = stack[:len(stack)-1], false
			group = append(group, w)
			if w == v {
				break
			}
		}
		slices.Sort(group)
		groups = append(groups, group)
	}
	for _, v := range sortedKeys(g) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	slices.SortFunc(groups, func(a, b []string) int { return cmp.Compare(a[0], b[0]) })
	return groups
}

// shortestCycle returns the shortest path from start back to start inside group (breadth
// first, neighbours in name order), without repeating start at the end.
func (g graph) shortestCycle(start string, group []string) []string {
	prev := map[string]string{}
	queue := []string{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range sortedKeys(g[v]) {
			if w == start {
				path := []string{v}
				for path[0] != start {
					path = append([]string{prev[path[0]]}, path...)
				}
				return path
			}
			if _, seen := prev[w]; !seen && slices.Contains(group, w) {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return group // not reached for a strongly connected group
}

// sortedKeys returns the keys of m in name order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// edges builds a graph from "from>to" pairs, with made-up imports.
func edges(pairs ...string) graph {
	g := graph{}
	for _, p := range pairs {
		from, to := p[:1], p[2:]
		if g[from] == nil {
			g[from] = map[string]edge{}
		}
		g[from][to] = edge{From: shared + from + "/x", To: shared + to + "/y"}
	}
	return g
}

// The finder names one shortest cycle per group of folders that import each other, and none
// for a graph without a cycle.
func TestCyclesFindsEachGroup(t *testing.T) {
	t.Parallel()
	assert.Empty(t, edges("a>b", "b>c", "a>c").cycles())
	assert.Equal(t, [][]string{{"a", "b"}}, edges("a>b", "b>a", "b>c").cycles())
	// a -> b -> c -> d -> a and the shorter a -> b -> d -> a; e <-> f apart.
	g := edges("a>b", "b>c", "c>d", "d>a", "b>d", "e>f", "f>e", "f>a")
	assert.Equal(t, [][]string{{"a", "b", "d"}, {"e", "f"}}, g.cycles())
	assert.Equal(t, "  e -> f: shared/e/x imports shared/f/y\n  f -> e: shared/f/x imports shared/e/y\n",
		describe(g, []string{"e", "f"}))
}

// The graph collapses packages to their top-level folder, leaves out the imports inside a
// folder and those of the test helpers, and keeps one import per pair of folders.
func TestFolderGraph(t *testing.T) {
	t.Parallel()
	g := folderGraph([]pkg{
		{ImportPath: shared + "store/storetest", Name: "storetest", Imports: []string{shared + "migrate"}},
		{ImportPath: shared + "migrate", Name: "migrate", Imports: []string{shared + "store", "fmt"}},
		{ImportPath: shared + "service/b", Name: "b", Imports: []string{shared + "store/postgres", shared + "service/a"}},
		{ImportPath: shared + "service/a", Name: "a", Imports: []string{shared + "store"}},
	})
	assert.Equal(t, graph{
		"migrate": {"store": {From: shared + "migrate", To: shared + "store"}},
		"service": {"store": {From: shared + "service/a", To: shared + "store"}},
	}, g)
}
