// Command lambdazip packages the function binaries that `make lambda` built: for every name
// given, it zips <dir>/<name>/bootstrap (and the -config file as queuebox.yml) into
// <dir>/<name>.zip, then prints the size of each binary and zip.
//
//	go run ./deploy/cmd/lambdazip -dir bin/lambda [-config path/to/queuebox.yml] poll relay ...
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/alternayte/queuebox/deploy/lambdazip"
)

func main() {
	dir := flag.String("dir", "bin/lambda", "the folder that holds <name>/bootstrap and receives <name>.zip")
	config := flag.String("config", "", "a configuration file to add to every zip as queuebox.yml")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "lambdazip: name at least one function")
		os.Exit(2)
	}
	if err := run(*dir, *config, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "lambdazip:", err)
		os.Exit(1)
	}
}

func run(dir, config string, names []string) error {
	if config != "" {
		if _, err := os.Stat(config); err != nil {
			return fmt.Errorf("reading LAMBDA_CONFIG: %w", err)
		}
	}
	sizes := make([]lambdazip.Size, 0, len(names))
	for _, name := range names {
		bootstrap := filepath.Join(dir, name, lambdazip.BootstrapName)
		zipPath := filepath.Join(dir, name+".zip")
		if err := lambdazip.Zip(zipPath, bootstrap, config); err != nil {
			return err
		}
		s, err := lambdazip.Measure(name, bootstrap, zipPath)
		if err != nil {
			return err
		}
		sizes = append(sizes, s)
	}
	if err := lambdazip.WriteTable(os.Stdout, sizes); err != nil {
		return err
	}
	if config != "" {
		fmt.Printf("each zip holds %s as %s: set QUEUEBOX_CONFIG_FILE=%s\n", config, lambdazip.ConfigName, lambdazip.ConfigPath)
	}
	return nil
}
