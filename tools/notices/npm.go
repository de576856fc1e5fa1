package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The folders of the npm packages that the notices read, relative to the repository root.
const (
	jsonataDir  = "shared/transform/jsjsonata"
	tsClientDir = "clients/typescript"
)

// packageLock is the part of an npm package-lock.json (lockfile version 2 or 3) that the
// generator reads.
type packageLock struct {
	LockfileVersion int                    `json:"lockfileVersion"`
	Packages        map[string]lockPackage `json:"packages"`
}

// lockPackage is one entry of a lock file's packages: "" is the package itself,
// "node_modules/<name>" an installed one.
type lockPackage struct {
	Name             string            `json:"name"`
	Version          string            `json:"version"`
	License          string            `json:"license"`
	Dev              bool              `json:"dev"`
	DevOptional      bool              `json:"devOptional"`
	Peer             bool              `json:"peer"`
	PeerDependencies map[string]string `json:"peerDependencies"`
}

// readLock reads the package-lock.json of the folder dir under root.
func readLock(root, dir string) (packageLock, error) {
	var lock packageLock
	path := filepath.Join(root, dir, "package-lock.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return lock, fmt.Errorf("read the npm lock file: %w", err)
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return lock, fmt.Errorf("read %s: %w", path, err)
	}
	if lock.LockfileVersion < 2 || lock.Packages == nil {
		return lock, fmt.Errorf("%s: lockfile version %d has no packages list; the generator reads versions 2 and 3", path, lock.LockfileVersion)
	}
	return lock, nil
}

// copyrightLine finds the copyright line of jsonata in the README of its folder: the
// package's LICENSE has none, its source files carry it.
var copyrightLine = regexp.MustCompile(`© Copyright [^,\n]+(?:, \d{4})+`)

// jsonataComponent returns jsonata.js, which shared/transform/jsjsonata embeds: its version
// and licence from the folder's package-lock.json, checked against the LICENSE file there.
func jsonataComponent(root string) (component, error) {
	c := component{Name: "jsonata", Kind: kindEmbedded}
	lock, err := readLock(root, jsonataDir)
	if err != nil {
		return c, err
	}
	pkg, ok := lock.Packages["node_modules/jsonata"]
	if !ok || pkg.Version == "" {
		return c, fmt.Errorf("%s/package-lock.json has no version of node_modules/jsonata", jsonataDir)
	}
	c.Version = pkg.Version
	text, err := os.ReadFile(filepath.Join(root, jsonataDir, "LICENSE"))
	if err != nil {
		return c, fmt.Errorf("read the licence of jsonata: %w", err)
	}
	f, err := classify("jsonata", "LICENSE", text)
	if err != nil {
		return c, fmt.Errorf("%s: %w", jsonataDir, err)
	}
	c.Licences = []licenceFile{f}
	if err := c.setLicence(); err != nil {
		return c, err
	}
	if c.Licence != pkg.License {
		return c, fmt.Errorf("%s: the lock file gives jsonata the licence %q and its LICENSE file is %s", jsonataDir, pkg.License, c.Licence)
	}
	readme, err := os.ReadFile(filepath.Join(root, jsonataDir, "README.md"))
	if err != nil {
		return c, fmt.Errorf("read the copyright of jsonata: %w", err)
	}
	line := copyrightLine.Find(readme)
	if line == nil {
		return c, fmt.Errorf("%s/README.md names no copyright of jsonata (© Copyright <holder> <years>)", jsonataDir)
	}
	c.Copyright = string(line)
	return c, nil
}

// npmInfo is the npm package of the TypeScript client and what it brings to an application.
type npmInfo struct {
	Name, Version string
	Runtime       []component // the packages that npm installs with it, by name
	Peers         []string    // its peer dependencies, which the application installs itself
}

// npmPackage reads the TypeScript client's package-lock.json: its runtime dependencies are
// the installed packages that are neither development nor peer dependencies.
func npmPackage(root string) (npmInfo, error) {
	var info npmInfo
	lock, err := readLock(root, tsClientDir)
	if err != nil {
		return info, err
	}
	self := lock.Packages[""]
	info.Name, info.Version = self.Name, self.Version
	for name := range self.PeerDependencies {
		info.Peers = append(info.Peers, name)
	}
	sort.Strings(info.Peers)
	for key, p := range lock.Packages {
		i := strings.LastIndex(key, "node_modules/")
		if i < 0 || p.Dev || p.DevOptional || p.Peer {
			continue
		}
		c := component{Name: key[i+len("node_modules/"):], Version: p.Version, Kind: kindNPM, Licence: p.License,
			TextFrom: "the LICENSE file of the npm package, installed with it"}
		if err := checkExpression(c.Name, p.License); err != nil {
			return info, fmt.Errorf("%s/package-lock.json: %w", tsClientDir, err)
		}
		info.Runtime = append(info.Runtime, c)
	}
	sort.Slice(info.Runtime, func(a, b int) bool { return info.Runtime[a].Name < info.Runtime[b].Name })
	return info, nil
}

// checkExpression fails for an npm package whose licence is missing or names a licence
// outside accepted.
func checkExpression(name, expr string) error {
	if strings.TrimSpace(expr) == "" {
		return fmt.Errorf("npm package %s gives no licence: read its licence and extend the generator", name)
	}
	var ids []string
	for _, word := range strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(expr)) {
		if word != "AND" && word != "OR" {
			ids = append(ids, word)
		}
	}
	return checkAccepted("npm package "+name, ids)
}
