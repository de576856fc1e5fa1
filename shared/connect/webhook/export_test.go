package webhook

import (
	"crypto/x509"
	"time"
)

// SetClock replaces the clock of the OAuth2 token cache of p. Call it before the first publish.
func SetClock(p *Publisher, now func() time.Time) {
	p.tokens.mu.Lock()
	defer p.tokens.mu.Unlock()
	p.tokens.now = now
}

// SetRootCAs makes p trust the certificates of pool, on both of its ways to a destination.
func SetRootCAs(p *Publisher, pool *x509.CertPool) {
	if p.wire != nil && p.wire.tlsConfig != nil {
		p.wire.tlsConfig.RootCAs = pool
	}
	p.transport.TLSClientConfig.RootCAs = pool
}

// UseTransport makes p send its deliveries through http.Transport, as it does when a proxy
// of the environment stands in front of the destination.
func UseTransport(p *Publisher) { p.wire = nil }

// OpenIdleConns returns how many idle connections of p's wire pool are still open.
func OpenIdleConns(p *Publisher) int {
	p.wire.mu.Lock()
	defer p.wire.mu.Unlock()
	n := 0
	for _, c := range p.wire.idle {
		if connOpen(c.raw) {
			n++
		}
	}
	return n
}
