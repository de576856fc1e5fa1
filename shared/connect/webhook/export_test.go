package webhook

import "time"

// SetClock replaces the clock of the OAuth2 token cache of p. Call it before the first publish.
func SetClock(p *Publisher, now func() time.Time) {
	p.tokens.mu.Lock()
	defer p.tokens.mu.Unlock()
	p.tokens.now = now
}
