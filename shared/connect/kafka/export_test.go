package kafka

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/alternayte/queuebox/shared/config"
)

// NewWithRootCAs is New with roots as the trusted certificate authorities of SSL and
// SASL_SSL, for a test broker whose certificate no system root signs.
func NewWithRootCAs(name string, d config.KafkaDestination, static map[string]string, roots *x509.CertPool) (*Publisher, error) {
	return newPublisher(name, d, static, func(_ *[]kgo.Opt, c *tls.Config) { c.RootCAs = roots })
}
