package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// shippedPatterns are the folders of the shipped binaries; their main packages are the
// binaries (functions/rietest, a test harness without a main, is left out by that).
var shippedPatterns = []string{"./local/...", "./functions/...", "./capturenode/..."}

// buildVariant is one way the binaries are built: the image and the Lambda functions are
// static Linux binaries for amd64 or arm64, and the functions carry the tag lambda.norpc.
type buildVariant struct{ goos, goarch, tags string }

// buildVariants are the builds whose linked modules are listed, together.
var buildVariants = []buildVariant{
	{"linux", "amd64", ""},
	{"linux", "arm64", ""},
	{"linux", "amd64", "lambda.norpc"},
	{"linux", "arm64", "lambda.norpc"},
}

// env is the go command's environment of the variant.
func (v buildVariant) env() []string {
	return []string{"GOOS=" + v.goos, "GOARCH=" + v.goarch, "CGO_ENABLED=0"}
}

// args puts the variant's tags, if any, before the go list arguments.
func (v buildVariant) args(rest ...string) []string {
	args := []string{"list"}
	if v.tags != "" {
		args = append(args, "-tags", v.tags)
	}
	return append(args, rest...)
}

// listedPackage is the part of one package of go list -json that the generator reads.
type listedPackage struct {
	ImportPath string
	Standard   bool
	Module     *listedModule
}

// listedModule is a package's module in go list -json.
type listedModule struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *listedModule
}

// goModules returns the modules that the shipped binaries link in any build variant, sorted
// by path, each with its licence files classified and its NOTICE files read.
func goModules(root string) ([]component, error) {
	linked := map[string]listedModule{}
	for _, v := range buildVariants {
		if err := addLinkedModules(root, v, linked); err != nil {
			return nil, err
		}
	}
	paths := make([]string, 0, len(linked))
	for p := range linked {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	comps := make([]component, 0, len(paths))
	for _, p := range paths {
		c, err := moduleComponent(linked[p])
		if err != nil {
			return nil, err
		}
		comps = append(comps, c)
	}
	return comps, nil
}

// addLinkedModules adds to linked the modules of the packages that the main packages of
// shippedPatterns link in the build variant v.
func addLinkedModules(root string, v buildVariant, linked map[string]listedModule) error {
	out, err := goCommand(root, v.env(), v.args(append([]string{"-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`}, shippedPatterns...)...)...)
	if err != nil {
		return fmt.Errorf("list the binaries: %w", err)
	}
	mains := strings.Fields(string(out))
	if len(mains) == 0 {
		return fmt.Errorf("list the binaries: no main package under %s", strings.Join(shippedPatterns, " "))
	}
	out, err = goCommand(root, v.env(), v.args(append([]string{"-deps", "-json=ImportPath,Standard,Module"}, mains...)...)...)
	if err != nil {
		return fmt.Errorf("list the packages that the binaries link: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read go list -deps: %w", err)
		}
		if p.Standard || p.Module == nil || p.Module.Main {
			continue
		}
		if p.Module.Replace != nil {
			return fmt.Errorf("module %s is replaced by %s %s: the notices generator lists no replaced module; read its licence and extend the generator", p.Module.Path, p.Module.Replace.Path, p.Module.Replace.Version)
		}
		if p.Module.Dir == "" {
			return fmt.Errorf("module %s %s is not in the module cache: run go mod download", p.Module.Path, p.Module.Version)
		}
		linked[p.Module.Path] = *p.Module
	}
}

// licenceFileName matches the names of the licence files at a module's root: LICENSE,
// LICENCE, COPYING and UNLICENSE, with any suffix (LICENSE.txt, LICENSE-MIT).
var licenceFileName = regexp.MustCompile(`(?i)^(licen[cs]e|copying|unlicense)([.\-_].*)?$`)

// noticeFileName matches the names of the NOTICE files at a module's root (Apache License
// 2.0, section 4(d): a redistribution carries their text).
var noticeFileName = regexp.MustCompile(`(?i)^notice([.\-_].*)?$`)

// moduleComponent reads and classifies the licence files and reads the NOTICE files at the
// root of the module m.
func moduleComponent(m listedModule) (component, error) {
	c := component{Name: m.Path, Version: m.Version, Kind: kindModule}
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return c, fmt.Errorf("module %s %s: %w", m.Path, m.Version, err)
	}
	for _, e := range entries {
		if e.IsDir() || !(licenceFileName.MatchString(e.Name()) || noticeFileName.MatchString(e.Name())) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(m.Dir, e.Name()))
		if err != nil {
			return c, fmt.Errorf("module %s %s: %w", m.Path, m.Version, err)
		}
		if noticeFileName.MatchString(e.Name()) {
			c.Notices = append(c.Notices, textFile{Name: e.Name(), Text: text})
			continue
		}
		f, err := classify(m.Path, e.Name(), text)
		if err != nil {
			return c, fmt.Errorf("module %s %s: %w", m.Path, m.Version, err)
		}
		c.Licences = append(c.Licences, f)
	}
	if len(c.Licences) == 0 {
		return c, fmt.Errorf("module %s %s: no licence file (LICENSE, COPYING, ...) at its root in %s: read its licence and extend the generator", m.Path, m.Version, m.Dir)
	}
	return c, c.setLicence()
}

// goStandardLibrary returns the Go standard library and runtime, which every binary links:
// its version is the go line of go.mod (the oldest toolchain that builds QueueBox), its
// licence the LICENSE file of the Go distribution that runs the generator.
func goStandardLibrary(root string) (component, error) {
	c := component{Name: "Go standard library and runtime", Kind: kindStd}
	out, err := goCommand(root, nil, "list", "-m", "-f", "{{.GoVersion}}")
	if err != nil {
		return c, fmt.Errorf("read the go line of go.mod: %w", err)
	}
	c.Version = "go " + strings.TrimSpace(string(out)) + " or later"
	out, err = goCommand(root, nil, "env", "GOROOT")
	if err != nil {
		return c, fmt.Errorf("find the Go distribution: %w", err)
	}
	text, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "LICENSE"))
	if err != nil {
		return c, fmt.Errorf("read the licence of the Go distribution: %w", err)
	}
	f, err := classify("go", "LICENSE", text)
	if err != nil {
		return c, fmt.Errorf("the Go distribution: %w", err)
	}
	c.Licences = []licenceFile{f}
	return c, c.setLicence()
}
