// Command healthprobe is the HEALTHCHECK of the QueueBox image (local/Dockerfile). The
// runtime image is distroless: it has no shell, curl or wget, so the image carries this small
// static program instead. It sends GET to the URL given as its argument (default
// http://127.0.0.1:8080/health) and exits 0 when the answer is 2xx within the timeout, and 1
// otherwise, printing why.
//
//	healthprobe [-timeout 3s] [url]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// defaultURL is the health route of the data port in the default configuration.
const defaultURL = "http://127.0.0.1:8080/health"

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run probes and returns the exit status.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	url := defaultURL
	switch fs.NArg() {
	case 0:
	case 1:
		url = fs.Arg(0)
	default:
		fmt.Fprintln(stderr, "healthprobe: give at most one URL")
		return 2
	}
	if err := probe(url, *timeout); err != nil {
		fmt.Fprintln(stderr, "healthprobe:", err)
		return 1
	}
	return 0
}

func probe(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probing %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
