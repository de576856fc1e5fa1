package queuebox

import (
	"strconv"
	"sync"
)

// maxClaimTexts bounds the claim texts that a worker keeps with their limits written in: one
// per batch size it has claimed with. Past it, a claim binds its limits as parameters.
const maxClaimTexts = 32

// claimTexts renders the PostgreSQL claim with its two limits, batch and cand_limit, written
// into the text as integers, once per batch size. With the limits as parameters PostgreSQL
// plans the claim again at every call (its generic plan, made for an unknown limit, looks dear
// to it: README.md, Benchmark); with them in the text each text can keep one generic plan on a
// connection, as the driver prepares each text once. The other parameters (source, lease_ms)
// stay parameters: source is the application's input and never becomes SQL text.
type claimTexts struct {
	mu    sync.Mutex
	texts map[int]statement
}

// statement returns the claim to run for batch rows: the text with the limits written in, or
// base (the limits as parameters) when the dialect is not PostgreSQL, when the bound is
// reached, or when rendering fails.
func (c *claimTexts) statement(base statement, batch int) statement {
	if base.dialect != DialectPostgreSQL {
		return base
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.texts[batch]; ok {
		return st
	}
	if len(c.texts) >= maxClaimTexts {
		return base
	}
	st, err := base.withLiterals(map[string]string{
		"batch":      strconv.Itoa(batch),
		"cand_limit": strconv.Itoa(candidateLimit(batch)),
	})
	if err != nil {
		return base
	}
	if c.texts == nil {
		c.texts = make(map[int]statement)
	}
	c.texts[batch] = st
	return st
}
