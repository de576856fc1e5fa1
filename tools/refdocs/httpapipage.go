package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/alternayte/queuebox/shared/service"
)

// apiDoc is the part of the OpenAPI description that the page reads.
type apiDoc struct {
	Tags       []apiTag              `yaml:"tags"`
	Security   []map[string][]string `yaml:"security"`
	Components struct {
		SecuritySchemes yaml.Node `yaml:"securitySchemes"`
	} `yaml:"components"`
	Paths yaml.Node `yaml:"paths"`
}

// apiTag is one tag of the description.
type apiTag struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// apiScheme is one security scheme.
type apiScheme struct {
	Type        string `yaml:"type"`
	Scheme      string `yaml:"scheme"`
	In          string `yaml:"in"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// apiOperation is one operation of a path.
type apiOperation struct {
	Summary    string                 `yaml:"summary"`
	Tags       []string               `yaml:"tags"`
	Deprecated bool                   `yaml:"deprecated"`
	Security   *[]map[string][]string `yaml:"security"`
	Responses  map[string]apiResponse `yaml:"responses"`
	Extra      map[string]any         `yaml:",inline"`
}

// apiResponse is one response of an operation: its description, or a reference to one.
type apiResponse struct {
	Description string `yaml:"description"`
	Ref         string `yaml:"$ref"`
}

// route is one row of the page.
type route struct {
	method, path, port, auth, summary, statuses string
	tag                                         string
}

// httpMethods are the operations of a path item, in the order of the page.
var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

// httpAPIPage is docs/reference/http-api.md, from the OpenAPI description description
// (openapi.YAML).
func httpAPIPage(description []byte) (string, error) {
	var doc apiDoc
	if err := yaml.Unmarshal(description, &doc); err != nil {
		return "", fmt.Errorf("parsing the OpenAPI description: %w", err)
	}
	routes, err := apiRoutes(doc)
	if err != nil {
		return "", err
	}
	var b md
	b.line("# HTTP API")
	b.line("")
	b.text(generatedNote)
	b.line("")
	b.line("Every route of the OpenAPI description that QueueBox serves at `GET /openapi.json`")
	b.line("([openapi.yaml](../openapi.yaml)), which has each route's request and answer bodies.")
	b.line("")
	b.line("- **Port**: `data` is `server.httpPort`; `management` is `server.managementPort`. Without a")
	b.line("  management port, the data port serves the management routes too; with one, the data port")
	b.line("  answers 404 on them. This column comes from the data port's routing itself.")
	b.line("- **Credentials**: the security schemes of the route, listed under [Credentials](#credentials);")
	b.line("  `none` for a route that needs none. A route whose credentials the description gives no scheme")
	b.line("  for says when it answers 401.")
	b.line("- **Answers**: the statuses that the description lists for the route.")
	b.line("")
	writeRoutes(&b, doc.Tags, routes)
	if err := writeSchemes(&b, doc); err != nil {
		return "", err
	}
	b.line(fmt.Sprintf("This page lists %d routes.", len(routes)))
	return b.String(), nil
}

// writeRoutes writes one table per tag, in the order of the tags, or one table without tags.
func writeRoutes(b *md, tags []apiTag, routes []route) {
	header := []string{"Method", "Path", "Port", "Credentials", "Answers", "Summary"}
	row := func(r route) []string {
		return []string{r.method, code(r.path), r.port, r.auth, r.statuses, r.summary}
	}
	groups := slices.Clone(tags)
	for _, r := range routes {
		if !slices.ContainsFunc(groups, func(t apiTag) bool { return t.Name == r.tag }) {
			groups = append(groups, apiTag{Name: r.tag})
		}
	}
	for _, g := range groups {
		var rows [][]string
		for _, r := range routes {
			if r.tag == g.Name {
				rows = append(rows, row(r))
			}
		}
		if len(rows) == 0 {
			continue
		}
		if g.Name != "" || len(groups) > 1 {
			b.line("## " + cmpOr(g.Name, "Other routes"))
			b.line("")
		}
		if g.Description != "" {
			b.line(strings.TrimSpace(g.Description))
			b.line("")
		}
		b.table(header, rows)
		b.line("")
	}
}

// cmpOr returns s, or alt when s is empty.
func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// apiRoutes returns the routes of the description, in its order.
func apiRoutes(doc apiDoc) ([]route, error) {
	if doc.Paths.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the OpenAPI description has no paths")
	}
	var routes []route
	for i := 0; i+1 < len(doc.Paths.Content); i += 2 {
		path := doc.Paths.Content[i].Value
		var item map[string]apiOperation
		if err := doc.Paths.Content[i+1].Decode(&item); err != nil {
			return nil, fmt.Errorf("decoding the path %s: %w", path, err)
		}
		for _, m := range httpMethods {
			op, ok := item[m]
			if !ok {
				continue
			}
			r := route{method: strings.ToUpper(m), path: path, summary: op.Summary, port: portOf(strings.ToUpper(m), path)}
			if op.Deprecated {
				r.summary += " (deprecated)"
			}
			if len(op.Tags) > 0 {
				r.tag = op.Tags[0]
			}
			r.auth = credentials(doc, op)
			r.statuses = statuses(op)
			routes = append(routes, r)
		}
	}
	return routes, nil
}

// credentials names the security schemes of op: its own, else the description's.
func credentials(doc apiDoc, op apiOperation) string {
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	var names []string
	for _, req := range reqs {
		var all []string
		for name := range req {
			all = append(all, fmt.Sprintf("[%s](#%s)", code(name), anchor(name)))
		}
		slices.Sort(all)
		if len(all) > 0 {
			names = append(names, strings.Join(all, " and "))
		}
	}
	if len(names) == 0 {
		if r, ok := op.Responses["401"]; ok && r.Description != "" {
			return "no scheme; 401 when " + r.Description
		}
		return "none"
	}
	return strings.Join(names, " or ")
}

// statuses lists the statuses of op's responses in ascending order.
func statuses(op apiOperation) string {
	var codes []string
	for c := range op.Responses {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return strings.Join(codes, ", ")
}

// pathParam finds a path parameter of the description: {source}.
var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// portOf asks the data port's routing (service.DataHandler) where the route goes: to the
// management routes, which have a port of their own when server.managementPort is set, or to
// the data port's own.
func portOf(method, path string) string {
	const probeHeader = "X-Refdocs-Route"
	mgmt := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set(probeHeader, "management") })
	in := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set(probeHeader, "data") })
	h := service.DataHandler(in, service.DataOptions{Management: mgmt})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, pathParam.ReplaceAllString(path, "x"), nil))
	if rec.Header().Get(probeHeader) == "management" {
		return "management"
	}
	return "data"
}

// writeSchemes writes the security schemes, in the order of the description.
func writeSchemes(b *md, doc apiDoc) error {
	n := doc.Components.SecuritySchemes
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return nil
	}
	b.line("## Credentials")
	b.line("")
	for i := 0; i+1 < len(n.Content); i += 2 {
		var s apiScheme
		if err := n.Content[i+1].Decode(&s); err != nil {
			return fmt.Errorf("decoding the security scheme %s: %w", n.Content[i].Value, err)
		}
		b.line("### " + n.Content[i].Value)
		b.line("")
		where := s.Type
		switch {
		case s.Type == schemeHTTP:
			where = "HTTP " + code(s.Scheme) + " authentication"
		case s.Type == "apiKey":
			where = fmt.Sprintf("A key in the %s %s", s.In, code(s.Name))
		}
		desc := strings.TrimSpace(s.Description)
		if desc != "" && !strings.HasSuffix(desc, ".") {
			desc += "."
		}
		b.line(where + ": " + desc)
		b.line("")
	}
	return nil
}

// schemeHTTP is the OpenAPI security scheme type of HTTP authentication (bearer, basic): a
// type of the OpenAPI description, not a destination kind.
const schemeHTTP = "http"
