//go:build !queuebox_no_nats

package nats

import "time"

// WithFetchWait returns c with the bound of a fetch that finds nothing set to d.
func WithFetchWait(c SourceConfig, d time.Duration) SourceConfig {
	c.fetchWait = d
	return c
}
