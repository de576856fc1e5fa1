package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/alternayte/queuebox/deploy/lambdazip"
	"github.com/alternayte/queuebox/shared/transform/builtin"
)

// connectorCost is what one broker destination (or the JSONata engine) adds to the poll
// function: the poll function built with every destination, less the poll function built with
// this one left out by its build tag (lambdazip.Connectors, `make lambda
// LAMBDA_DESTINATIONS=...`; builtin.Tag, `make lambda LAMBDA_JSONATA=no`).
type connectorCost struct {
	// Kind is the destination kind; "rabbitmq+kafka+nats" leaves every broker out (the poll
	// function with http alone).
	Kind string `json:"kind"`
	// Tags are the build tags of the build without it.
	Tags []string `json:"tags"`
	// Without is the size of the poll function built without it.
	Without lambdazip.Size `json:"without"`
	// BootstrapBytes and ZipBytes are its cost: the full build's size less Without.
	BootstrapBytes int64 `json:"bootstrapBytes"`
	ZipBytes       int64 `json:"zipBytes"`
}

// connectorInfo is the cost of each broker destination in the poll function's package.
type connectorInfo struct {
	// Full is the poll function with every destination, as `make lambda` builds it.
	Full  lambdazip.Size  `json:"full"`
	Costs []connectorCost `json:"costs"`
}

// measureConnectors builds the poll function once with every destination and once without
// each broker destination (and once without all of them, and once without the JSONata
// engine), zips each build as `make lambda` does, and returns the differences.
func measureConnectors(ctx context.Context, work string) (*connectorInfo, error) {
	size := func(label string, tags []string) (lambdazip.Size, error) {
		dir := filepath.Join(work, "connectors", label)
		bootstrap, zipPath := filepath.Join(dir, lambdazip.BootstrapName), filepath.Join(dir, "poll.zip")
		fmt.Fprintf(os.Stderr, "building functions/poll (%s)\n", label)
		if err := lambdazip.BuildTagged(ctx, ".", "poll", bootstrap, tags...); err != nil {
			return lambdazip.Size{}, err
		}
		if err := lambdazip.Zip(zipPath, bootstrap, ""); err != nil {
			return lambdazip.Size{}, err
		}
		return lambdazip.Measure("poll", bootstrap, zipPath)
	}
	full, err := size("full", nil)
	if err != nil {
		return nil, err
	}
	info := &connectorInfo{Full: full}
	var kinds, every []string
	for _, c := range lambdazip.Connectors {
		kinds = append(kinds, c.Kind)
		every = append(every, c.Tag)
	}
	cases := []connectorCost{}
	for _, c := range lambdazip.Connectors {
		cases = append(cases, connectorCost{Kind: c.Kind, Tags: []string{c.Tag}})
	}
	cases = append(cases, connectorCost{Kind: strings.Join(kinds, "+"), Tags: every})
	// The JSONata engine (`make lambda LAMBDA_JSONATA=no`) is measured the same way.
	cases = append(cases, connectorCost{Kind: "jsonata", Tags: []string{builtin.Tag}})
	for _, cc := range cases {
		if cc.Without, err = size("without-"+cc.Kind, cc.Tags); err != nil {
			return nil, err
		}
		cc.BootstrapBytes = full.Bootstrap - cc.Without.Bootstrap
		cc.ZipBytes = full.Zip - cc.Without.Zip
		info.Costs = append(info.Costs, cc)
	}
	return info, nil
}

// writeConnectorTable prints the cost of each broker destination in the poll function.
func writeConnectorTable(w io.Writer, info *connectorInfo) {
	fmt.Fprintf(w, "\nBroker destinations and the JSONata engine in the poll function (full: bootstrap %.1f MB, zip %.2f MB; http is always in):\n",
		float64(info.Full.Bootstrap)/1e6, float64(info.Full.Zip)/1e6)
	fmt.Fprintf(w, "%-20s %14s %12s %14s %12s\n", "left out", "bootstrap MB", "zip MB", "cost boot MB", "cost zip MB")
	for _, c := range info.Costs {
		fmt.Fprintf(w, "%-20s %14.2f %12.2f %14.2f %12.2f\n", c.Kind,
			float64(c.Without.Bootstrap)/1e6, float64(c.Without.Zip)/1e6, float64(c.BootstrapBytes)/1e6, float64(c.ZipBytes)/1e6)
	}
}
