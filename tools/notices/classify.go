package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/google/licensecheck"
)

// accepted are the licences (SPDX identifiers) that QueueBox may bundle under the Apache
// License 2.0: permissive licences whose terms a redistribution meets by carrying their
// texts and NOTICE files. Another licence, even one that licensecheck knows, stops the
// generator until a person has read it and added it here.
var accepted = []string{"Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "MIT", "MIT-0"}

// minCoverage is the share of a licence file's text, in percent, that must be known licence
// text; the rest are the copyright lines and headings around it. A file below it may carry
// terms that no match saw, so it stops the generator.
const minCoverage = 80

// review is the classification of a licence file that licensecheck does not classify, made
// by a person who read the text.
type review struct {
	sha256 string   // the SHA-256 of the text that was read, in hex
	ids    []string // the licences that the text grants; none for a summary of other files
	reason string   // what the text is, printed in the notices
}

// reviewed are the licence files that a person classified, by module path and file name.
// The entry holds only while the text is the one that was read.
var reviewed = map[string]review{
	"github.com/aws/aws-lambda-go LICENSE-SUMMARY": {
		sha256: "00c31061d11a7d289e3f5ac49f58b0d5cffdd9d1d24a9ee4c9848354356386bc",
		reason: "a summary that grants no licence of its own: the module is under LICENSE (Apache-2.0), its Lambda function code under LICENSE-LAMBDACODE (MIT-0)",
	},
}

// componentKind tells where a component comes from, and so where its licence text is.
type componentKind int

const (
	kindModule   componentKind = iota // a Go module, its licence files in the module cache
	kindStd                           // the Go standard library, its LICENSE in the Go distribution
	kindEmbedded                      // a file that the repository embeds, its LICENSE beside it
	kindNPM                           // an npm package installed with the TypeScript client
)

// component is one third-party part that the notices list.
type component struct {
	Name     string
	Version  string
	Kind     componentKind
	Licence  string        // an SPDX expression: the licences of its files joined with AND
	Licences []licenceFile // its licence files, by name
	Notices  []textFile    // its NOTICE files, by name
	TextFrom string        // where its licence text is, when not in Licences (npm packages)
	// Copyright is the copyright line of a component whose licence files carry none.
	Copyright string
}

// textFile is one file of a component, by its name in the component.
type textFile struct {
	Name string
	Text []byte
}

// licenceFile is a classified licence file.
type licenceFile struct {
	textFile
	IDs      []string // the licences that its text grants, in the order of the text
	Reviewed string   // the reason of a person's classification, if it was not licensecheck's
	// Apache is set when the whole text is the Apache License 2.0 with nothing added, the
	// same licence as QueueBox's LICENSE, so that the notices need not repeat it.
	Apache bool
}

// classify classifies the licence file name of the component owner by its text.
func classify(owner, name string, text []byte) (licenceFile, error) {
	f := licenceFile{textFile: textFile{Name: name, Text: text}}
	sum := sha256.Sum256(text)
	if r, ok := reviewed[owner+" "+name]; ok {
		if got := hex.EncodeToString(sum[:]); got != r.sha256 {
			return f, fmt.Errorf("%s was classified by a person for the text of SHA-256 %s, and its text is now %s: read it again and update reviewed in tools/notices/classify.go", name, r.sha256, got)
		}
		f.IDs, f.Reviewed = r.ids, r.reason
		return f, checkAccepted(name, f.IDs)
	}
	cov := licensecheck.Scan(text)
	for _, m := range cov.Match {
		if !m.IsURL && !slices.Contains(f.IDs, m.ID) {
			f.IDs = append(f.IDs, m.ID)
		}
	}
	if len(f.IDs) == 0 {
		return f, fmt.Errorf("%s: licensecheck knows no licence in its text: read it, and add it to reviewed in tools/notices/classify.go if QueueBox may bundle it", name)
	}
	if cov.Percent < minCoverage {
		return f, fmt.Errorf("%s: only %.1f%% of its text is known licence text (%s), below %d%%: read it, and add it to reviewed in tools/notices/classify.go if QueueBox may bundle it", name, cov.Percent, strings.Join(f.IDs, ", "), minCoverage)
	}
	f.Apache = len(f.IDs) == 1 && f.IDs[0] == "Apache-2.0" && cov.Percent == 100
	return f, checkAccepted(name, f.IDs)
}

// checkAccepted fails for a licence outside accepted.
func checkAccepted(name string, ids []string) error {
	for _, id := range ids {
		if !slices.Contains(accepted, id) {
			return fmt.Errorf("%s: its licence %s is not among the accepted ones (%s): a person must decide whether QueueBox may bundle it, then extend accepted in tools/notices/classify.go", name, id, strings.Join(accepted, ", "))
		}
	}
	return nil
}

// setLicence sets the component's licence from the licences of its files, in their order.
func (c *component) setLicence() error {
	var ids []string
	for _, f := range c.Licences {
		for _, id := range f.IDs {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("%s %s: its licence files grant no licence", c.Name, c.Version)
	}
	c.Licence = strings.Join(ids, " AND ")
	return nil
}
