//go:build !queuebox_no_kafka

package kafka

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/twmb/franz-go/pkg/kgo"
)

// NewWithRootCAs is New with roots as the trusted certificate authorities of SSL and
// SASL_SSL, for a test broker whose certificate no system root signs.
func NewWithRootCAs(name string, c Config, roots *x509.CertPool) (*Publisher, error) {
	return newPublisher(name, c, func(_ *[]kgo.Opt, tc *tls.Config) { tc.RootCAs = roots })
}

// WithClientOpts returns c with opts added to the consumer's client options, for a test that
// needs a shorter group session than the default.
func WithClientOpts(c SourceConfig, opts ...kgo.Opt) SourceConfig {
	c.extra = append(c.extra, opts...)
	return c
}
