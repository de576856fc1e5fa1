package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/outboxbench"
)

// system is one system under test for one run. prepare puts the messages in PostgreSQL before
// the clock starts; deliver delivers them all to the receiver and returns when every message
// was acknowledged (or ctx ends), with the failed deliveries it counted; expected maps each
// message id to its key and insert order once delivery ended; close stops the system.
type system interface {
	appName() string
	prepare(ctx context.Context, db *benchdb.Database, receiver string, rows, keys int) error
	deliver(ctx context.Context) (failures int, err error)
	expected(ctx context.Context, db *benchdb.Database, rows, keys int) (map[string]ref, error)
	problems() []string
	close()
}

// factory makes a fresh system for each run. order says how the system keeps a key's
// messages in order (the table prints it); ordered makes an order violation fail the run.
type factory struct {
	system, variant, label string
	order                  string
	ordered                bool
	new                    func() system
}

// ref is what the bench knows of one message: its key ("" for none) and its insert order.
type ref struct {
	key string
	ord int64
}

// topic is the topic of every message (QueueBox's row topic, the X-Topic header).
const topic = "orders.created"

// keyOf is the key of message i: 'k' || (i % keys), or "" without keys.
func keyOf(i, keys int) string {
	if keys <= 0 {
		return ""
	}
	return "k" + strconv.Itoa(i%keys)
}

// messageID is the X-Message-Id of message i of the peers; QueueBox sends its row ids.
func messageID(i int) string { return "msg-" + strconv.Itoa(i) }

// messageIndex is the inverse of messageID, or -1.
func messageIndex(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "msg-"))
	if err != nil || !strings.HasPrefix(id, "msg-") {
		return -1
	}
	return n
}

// peerExpected is the expected map of the peers: message i has id messageID(i), key keyOf(i).
func peerExpected(rows, keys int) map[string]ref {
	m := make(map[string]ref, rows)
	for i := range rows {
		m[messageID(i)] = ref{key: keyOf(i, keys), ord: int64(i)}
	}
	return m
}

// largePayload selects the ~320-byte body of the earlier runs instead of the ~85-byte one;
// Run sets it from Options.Payload before any message is made.
var largePayload bool

// payload is the JSON body of message i, the same for every system: about 85 bytes, or about
// 320 with largePayload (QueueBox stores it as jsonb and sends jsonb's text of it, a few
// bytes longer).
func payload(i int, key string) []byte {
	if !largePayload {
		return fmt.Appendf(nil, `{"orderId":%d,"customerId":"cust-%06d","key":%q,"amount":1999,"currency":"EUR"}`, i, i%100000, key)
	}
	return fmt.Appendf(nil, `{"orderId":%d,"customerId":"cust-%06d","key":%q,"amount":1999,"currency":"EUR",`+
		`"status":"created","items":[{"sku":"SKU-1001","quantity":2,"price":499},`+
		`{"sku":"SKU-2002","quantity":1,"price":1001}],"shipping":{"name":"Ada Lovelace","street":"12 St James's Square",`+
		`"city":"London","postcode":"SW1Y 4JH","country":"GB"}}`, i, i%100000, key)
}

// topicIndex is the Watermill topic of message i: hash(key) % topics with keys, so one key
// stays in order within its topic, and i % topics without.
func topicIndex(i int, key string, topics int) int {
	if key == "" {
		return i % topics
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(topics))
}

// Delivery is what the receiver saw of one run, judged against the messages put in.
type Delivery struct {
	// Expected is the number of messages put in; Distinct the ids that arrived of them.
	Expected int `json:"expected"`
	Distinct int `json:"distinct"`
	Missing  int `json:"missing"`
	// Unknown are arrived ids that were never put in.
	Unknown int `json:"unknown"`
	// Requests and Duplicates are the receiver's counters (arrivals of an id seen before).
	Requests   int `json:"requests"`
	Duplicates int `json:"duplicates"`
	// OrderChecked is set in the keyed mode; OrderViolations counts first arrivals of a key
	// that came after a later message of the same key.
	OrderChecked    bool `json:"orderChecked"`
	OrderViolations int  `json:"orderViolations"`
}

// checkDelivery judges the receiver's first arrivals (earliest first) against the expected
// messages.
func checkDelivery(expected map[string]ref, arrivals []outboxbench.Arrival, stats outboxbench.SinkStats, keyed bool) Delivery {
	d := Delivery{Expected: len(expected), Requests: stats.Requests, Duplicates: stats.Duplicates, OrderChecked: keyed}
	last := map[string]int64{}
	for _, a := range arrivals {
		r, ok := expected[a.ID]
		if !ok {
			d.Unknown++
			continue
		}
		d.Distinct++
		if !keyed || r.key == "" {
			continue
		}
		if prev, seen := last[r.key]; seen && r.ord < prev {
			d.OrderViolations++
			continue
		}
		last[r.key] = r.ord
	}
	d.Missing = d.Expected - d.Distinct
	return d
}

// problems lists what fails the bench: a lost message, an unknown id, for a system that
// promises per-key order (ordered) a key delivered out of order, and a duplicate from a run
// that counted no failed delivery (the systems deliver at least once, so they send a message
// again only after a failure; the ceiling never does).
func (d Delivery) problems(ordered bool, failures int) []string {
	var p []string
	if d.Duplicates > 0 && failures == 0 {
		p = append(p, fmt.Sprintf("%d duplicate requests though no delivery failed", d.Duplicates))
	}
	if d.Missing > 0 {
		p = append(p, fmt.Sprintf("%d of %d messages never arrived", d.Missing, d.Expected))
	}
	if d.Unknown > 0 {
		p = append(p, fmt.Sprintf("%d unknown message ids arrived", d.Unknown))
	}
	if ordered && d.OrderChecked && d.OrderViolations > 0 {
		p = append(p, fmt.Sprintf("%d messages arrived before an earlier message of their key", d.OrderViolations))
	}
	return p
}

// poster is the HTTP client of the peers' workers: a keep-alive pool as large as QueueBox's
// webhook publisher keeps (128 idle connections per host), the same headers.
type poster struct {
	url    string
	client *http.Client
}

func newPoster(base string) *poster {
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
	}
	return &poster{url: base + "/events", client: &http.Client{Transport: transport, Timeout: 10 * time.Second}}
}

// post POSTs body with the message's headers and returns nil on a 2xx answer.
func (p *poster) post(ctx context.Context, id, key string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["X-Message-Id"] = []string{id}
	h["X-Topic"] = []string{topic}
	if key != "" {
		h["X-Message-Key"] = []string{key}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("posting %s: %w", id, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("posting %s: HTTP %d", id, resp.StatusCode)
	}
	return nil
}

func (p *poster) close() { p.client.CloseIdleConnections() }

// acks counts the distinct messages a peer delivered (answered 2xx) and closes done when every
// one was; failures counts the deliveries that failed.
type acks struct {
	seen     []atomic.Bool
	count    atomic.Int64
	failures atomic.Int64
	done     chan struct{}
}

func newAcks(rows int) *acks {
	return &acks{seen: make([]atomic.Bool, rows), done: make(chan struct{})}
}

// ack records the delivery of message id (messageID form); ids of no message are ignored.
func (a *acks) ack(id string) {
	i := messageIndex(id)
	if i < 0 || i >= len(a.seen) || a.seen[i].Swap(true) {
		return
	}
	if a.count.Add(1) == int64(len(a.seen)) {
		close(a.done)
	}
}

// wait blocks until every message was delivered or ctx ends.
func (a *acks) wait(ctx context.Context) (failures int, err error) {
	select {
	case <-a.done:
		return int(a.failures.Load()), nil
	case <-ctx.Done():
		return int(a.failures.Load()), fmt.Errorf("%d of %d delivered: %w", a.count.Load(), len(a.seen), ctx.Err())
	}
}

// moduleVersions are the versions of the systems' modules in this binary.
func moduleVersions() map[string]string {
	out := map[string]string{"go": "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	out["go"] = bi.GoVersion
	for _, d := range bi.Deps {
		if slices.Contains([]string{"github.com/riverqueue/river", "github.com/riverqueue/river/riverdriver/riverpgxv5",
			"github.com/ThreeDotsLabs/watermill", "github.com/ThreeDotsLabs/watermill-sql/v4", "github.com/jackc/pgx/v5"}, d.Path) {
			out[d.Path] = d.Version
		}
	}
	return out
}
