package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoticesAreCurrent fails when the committed THIRD_PARTY_NOTICES.md is not what the
// generator writes now: a dependency added, removed or upgraded without `make notices`.
func TestNoticesAreCurrent(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(root)
	if err != nil {
		t.Fatalf("generate the notices: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(root, noticesFile))
	if err != nil {
		t.Fatalf("read the committed notices: %v", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	line := 0
	for line < len(gotLines) && line < len(wantLines) && gotLines[line] == wantLines[line] {
		line++
	}
	at := func(lines []string) string {
		if line < len(lines) {
			return lines[line]
		}
		return "(end of file)"
	}
	t.Fatalf("%s is not what tools/notices writes now: run `make notices` and commit it.\nfirst difference at line %d:\ncommitted: %s\ngenerated: %s",
		noticesFile, line+1, at(gotLines), at(wantLines))
}

// TestLicenceFilesAreApache checks that the licence of QueueBox, of the Go client and of the
// npm package is the Apache License 2.0 with nothing added, which the notices refer to
// rather than repeat.
func TestLicenceFilesAreApache(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	top, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := classify("queuebox", "LICENSE", top)
	if err != nil || !f.Apache {
		t.Fatalf("LICENSE: classified as %v (the Apache License 2.0 alone: %v), error %v", f.IDs, f.Apache, err)
	}
	for _, dir := range []string{"clients/go", tsClientDir} {
		b, err := os.ReadFile(filepath.Join(root, dir, "LICENSE"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, top) {
			t.Errorf("%s/LICENSE differs from LICENSE", dir)
		}
	}
}

// TestClassifyRefuses checks that a text that is no known licence, a known licence outside
// accepted, a licence with much text around it and a reviewed file whose text changed all
// stop the generator.
func TestClassifyRefuses(t *testing.T) {
	mit, err := os.ReadFile("../../" + jsonataDir + "/LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	extra := strings.Repeat("The licensee shall also send a postcard to the authors every year. ", 40)
	cases := []struct {
		name, owner, file, text, want string
	}{
		{"no known licence", "example.com/m", "LICENSE", "All rights reserved. No one may copy this software.\n", "knows no licence"},
		{"licence outside accepted", "example.com/m", "COPYING",
			"This program is free software; you can redistribute it and/or modify it under the terms of the GNU General Public License as published by the Free Software Foundation; either version 2 of the License, or (at your option) any later version.\n",
			"GPL-2.0-or-later is not among the accepted"},
		{"licence with added terms", "example.com/m", "LICENSE", string(mit) + "\n" + extra, "known licence text"},
		{"reviewed text changed", "github.com/aws/aws-lambda-go", "LICENSE-SUMMARY", "Everything here is under new terms.\n", "read it again"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := classify(c.owner, c.file, []byte(c.text))
			if err == nil {
				t.Fatalf("classified as %v, want an error containing %q", f.IDs, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestClassifyReadsEachLicence checks a file that holds two licences and the licence of a
// component joined from its files.
func TestClassifyReadsEachLicence(t *testing.T) {
	apache, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	mit, err := os.ReadFile("../../" + jsonataDir + "/LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	both, err := classify("example.com/m", "LICENSE", append(append(apache, '\n'), mit...))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(both.IDs, " ") != "Apache-2.0 MIT" || both.Apache {
		t.Fatalf("Apache then MIT classified as %v (Apache alone: %v)", both.IDs, both.Apache)
	}
	only, err := classify("example.com/m", "LICENSE-MIT", mit)
	if err != nil {
		t.Fatal(err)
	}
	c := component{Name: "example.com/m", Licences: []licenceFile{both, only}}
	if err := c.setLicence(); err != nil || c.Licence != "Apache-2.0 AND MIT" {
		t.Fatalf("licence %q, error %v; want Apache-2.0 AND MIT", c.Licence, err)
	}
}

// TestNPMRuntimeDependencies checks which entries of a lock file the notices take for the
// npm package's runtime dependencies, and that one without an accepted licence stops them.
func TestNPMRuntimeDependencies(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, tsClientDir), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(lock string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, tsClientDir, "package-lock.json"), []byte(lock), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"lockfileVersion": 3, "packages": {
		"": {"name": "pkg", "version": "1.0.0", "peerDependencies": {"peer-a": "^1"}},
		"node_modules/run-a": {"version": "2.0.0", "license": "MIT"},
		"node_modules/run-a/node_modules/run-b": {"version": "0.1.0", "license": "(MIT OR Apache-2.0)"},
		"node_modules/dev-a": {"version": "3.0.0", "license": "GPL-3.0", "dev": true},
		"node_modules/dev-b": {"version": "3.0.0", "license": "MIT", "devOptional": true},
		"node_modules/peer-a": {"version": "1.2.0", "license": "Apache-2.0", "peer": true}}}`)
	info, err := npmPackage(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range info.Runtime {
		got = append(got, c.Name+"@"+c.Version+" "+c.Licence)
	}
	if want := "run-a@2.0.0 MIT, run-b@0.1.0 (MIT OR Apache-2.0)"; strings.Join(got, ", ") != want {
		t.Fatalf("runtime dependencies %q, want %q", strings.Join(got, ", "), want)
	}
	if strings.Join(info.Peers, " ") != "peer-a" {
		t.Fatalf("peer dependencies %v, want peer-a", info.Peers)
	}
	write(`{"lockfileVersion": 3, "packages": {"": {"name": "pkg"}, "node_modules/x": {"version": "1.0.0"}}}`)
	if _, err := npmPackage(root); err == nil || !strings.Contains(err.Error(), "gives no licence") {
		t.Fatalf("a runtime dependency without a licence: error %v", err)
	}
	write(`{"lockfileVersion": 3, "packages": {"": {"name": "pkg"}, "node_modules/x": {"version": "1.0.0", "license": "SSPL-1.0"}}}`)
	if _, err := npmPackage(root); err == nil || !strings.Contains(err.Error(), "not among the accepted") {
		t.Fatalf("a runtime dependency under SSPL-1.0: error %v", err)
	}
}
