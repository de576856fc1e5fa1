// Package consumetest is the behaviour suite that every broker source (inbox consumer) of
// shared/connect will pass, as every destination passes shared/connect/publishtest. A
// source's test calls Run with its Features and a constructor of fresh targets on its real
// system and a real inbox store (shared/store/postgres/dbtest):
//
//	func TestSourceContract(t *testing.T) {
//		consumetest.Run(t, consumetest.Features{RedeliveryWait: 30 * time.Second}, newTarget)
//	}
//
// The cases are those of spec/07-bridge-a-broker.md that hold for every broker: a message
// is stored once per idempotency key; a message whose row committed but whose consumer never
// learnt it (a crash between the commit and the acknowledgement) is redelivered and still
// stored once; a message whose store failed is
// redelivered and stored; a body that is not JSON is stored as a dead row and does not
// block the messages after it. The cases of one system alone (offset commits, prefetch,
// ackWaitMs) stay in the system's folder.
package consumetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
)

// Sink is where a source stores what it reads: the inbox inserts of store.InboxStore, which
// the source's inbox.Intake calls. A source acknowledges a message only after the sink
// stored it (or found it a duplicate).
type Sink = inbox.Inserter

// Source is one consumer of a broker source, the interface the broker sources implement.
type Source interface {
	// Run consumes the source's messages and stores each through sink, then acknowledges
	// it, until ctx ends; it then returns without acknowledging what it holds. It returns
	// ctx's error, or the error that stopped it.
	Run(ctx context.Context, sink Sink) error
}

// Message is one message a test produces on the system a source reads.
type Message struct {
	// Body is the message body, byte for byte.
	Body []byte
	// Headers are the message headers (x-idempotency-key among them).
	Headers map[string]string
}

// Row is one inbox row of the source, as the store holds it.
type Row struct {
	IdempotencyKey string
	State          string
	Payload        []byte
}

// Target is one broker source under test, on resources of its own (a queue, a topic and
// group, a stream and durable) and a real inbox store.
type Target struct {
	// NewSource builds a consumer of the source: each call is a new process of the same
	// source, consuming the same queue, group or durable.
	NewSource func(t *testing.T) Source
	// Produce sends m to the system the source reads.
	Produce func(t *testing.T, m Message)
	// Sink is the inbox store the source writes to.
	Sink Sink
	// Rows returns the inbox rows of the source.
	Rows func(t *testing.T) []Row
}

// Constructor builds a new target; it registers the release of its resources with
// t.Cleanup.
type Constructor func(t *testing.T) Target

// Features carries what the cases need of a source.
type Features struct {
	// RedeliveryWait bounds the wait for the system to deliver again a message that a
	// consumer held without acknowledging (NATS: ackWaitMs; RabbitMQ and Kafka: the next
	// consumer's start). Zero means WaitLimit.
	RedeliveryWait time.Duration
}

// WaitLimit bounds every wait of the suite for a condition; it is no speed assertion.
const WaitLimit = 30 * time.Second

// Run runs the contract cases against targets of newTarget.
func Run(t *testing.T, f Features, newTarget Constructor) {
	t.Helper()
	if f.RedeliveryWait <= 0 {
		f.RedeliveryWait = WaitLimit
	}
	t.Run("StoredOncePerIdempotencyKey", func(t *testing.T) { storedOnce(t, newTarget) })
	t.Run("RedeliveryAfterCrashStoredOnce", func(t *testing.T) { crash(t, f, newTarget) })
	t.Run("StoreFailureRedelivers", func(t *testing.T) { storeFailure(t, f, newTarget) })
	t.Run("BadBodyStoredDead", func(t *testing.T) { badBody(t, newTarget) })
}

// NewMessage returns a message with idempotency key key and a JSON body that names it.
func NewMessage(key string) Message {
	return Message{
		Body:    []byte(`{"id":"` + key + `"}`),
		Headers: map[string]string{"x-idempotency-key": key},
	}
}

// recorder is a Sink over the target's store that records every insert it passed on and
// its result, and can fail or hold the inserts of one key.
type recorder struct {
	next Sink
	// before runs before an insert of key reaches the store; an error fails the insert.
	before func(key string) error
	// lose runs once an insert of key is stored and recorded; true makes the source get an
	// error instead of the result, as if the answer of the commit were lost.
	lose func(key string) bool

	mu   sync.Mutex
	seen map[string][]store.InboxInsertResult
	ch   chan struct{}
}

func newRecorder(next Sink) *recorder {
	return &recorder{next: next, seen: map[string][]store.InboxInsertResult{}, ch: make(chan struct{}, 1)}
}

func (r *recorder) InboxInsert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	res, err := r.InboxInsertBatch(ctx, []store.InboxInsertParams{p})
	if err != nil {
		return store.InboxInsertResult{}, err
	}
	return res[0], nil
}

func (r *recorder) InboxInsertBatch(ctx context.Context, ps []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	if r.before != nil {
		for _, p := range ps {
			if err := r.before(p.IdempotencyKey); err != nil {
				return nil, err
			}
		}
	}
	res, err := r.next.InboxInsertBatch(ctx, ps)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	for i, p := range ps {
		r.seen[p.IdempotencyKey] = append(r.seen[p.IdempotencyKey], res[i])
	}
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
	if r.lose != nil {
		for _, p := range ps {
			if r.lose(p.IdempotencyKey) {
				return nil, errors.New("consumetest: the answer of the commit was lost")
			}
		}
	}
	return res, nil
}

// waitFor waits until cond holds over what the recorder saw, for limit at most.
func (r *recorder) waitFor(t *testing.T, limit time.Duration, what string, cond func(seen map[string][]store.InboxInsertResult) bool) {
	t.Helper()
	deadline := time.After(limit)
	for {
		r.mu.Lock()
		ok := cond(r.seen)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("%s: not within %s", what, limit)
		}
	}
}

// rowsOf returns the rows of key.
func rowsOf(rows []Row, key string) []Row {
	var out []Row
	for _, r := range rows {
		if r.IdempotencyKey == key {
			out = append(out, r)
		}
	}
	return out
}

// wantOneRow checks that the store holds one row of key, in state.
func wantOneRow(t *testing.T, tg Target, key, state string) Row {
	t.Helper()
	rows := rowsOf(tg.Rows(t), key)
	if len(rows) != 1 {
		t.Fatalf("the inbox holds %d rows of key %s, want 1", len(rows), key)
	}
	if rows[0].State != state {
		t.Fatalf("the row of key %s is %s, want %s", key, rows[0].State, state)
	}
	return rows[0]
}

// storedOnce produces two messages of one key and one of another, and wants one row each,
// after the source has passed the repeat to the store and seen it a duplicate.
func storedOnce(t *testing.T, newTarget Constructor) {
	tg := newTarget(t)
	rec := newRecorder(tg.Sink)
	for _, k := range []string{"once-a", "once-b", "once-a"} {
		tg.Produce(t, NewMessage(k))
	}
	Start(t, tg.NewSource(t), rec)
	rec.waitFor(t, WaitLimit, "the source stored once-a twice and once-b", func(seen map[string][]store.InboxInsertResult) bool {
		return len(seen["once-a"]) >= 2 && len(seen["once-b"]) >= 1
	})
	for _, k := range []string{"once-a", "once-b"} {
		row := wantOneRow(t, tg, k, "pending")
		var body map[string]string
		if err := json.Unmarshal(row.Payload, &body); err != nil || body["id"] != k {
			t.Errorf("the row of key %s holds payload %s, want the message body", k, row.Payload)
		}
	}
}

// crash commits a message's row and then loses the answer, as a process that died between
// the commit and the acknowledgement would: the source must not acknowledge the message,
// the system delivers it again, and the store keeps one row, the repeat a duplicate.
func crash(t *testing.T, f Features, newTarget Constructor) {
	tg := newTarget(t)
	rec := newRecorder(tg.Sink)
	var mu sync.Mutex
	lost := false
	rec.lose = func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		if key == "crash-1" && !lost {
			lost = true
			return true
		}
		return false
	}
	tg.Produce(t, NewMessage("crash-1"))
	Start(t, tg.NewSource(t), rec)
	rec.waitFor(t, f.RedeliveryWait+WaitLimit, "crash-1 was stored, its answer lost, and delivered again", func(seen map[string][]store.InboxInsertResult) bool {
		return len(seen["crash-1"]) >= 2
	})
	rec.mu.Lock()
	for i, res := range rec.seen["crash-1"] {
		if i > 0 && !res.Duplicate {
			t.Errorf("the redelivered crash-1 was stored as a new row %s", res.ID)
		}
	}
	rec.mu.Unlock()
	wantOneRow(t, tg, "crash-1", "pending")
}

// storeFailure fails the first insert of a message; the source must not acknowledge it, and
// the message is stored on a later delivery.
func storeFailure(t *testing.T, f Features, newTarget Constructor) {
	tg := newTarget(t)
	rec := newRecorder(tg.Sink)
	var mu sync.Mutex
	failed := 0
	rec.before = func(key string) error {
		mu.Lock()
		defer mu.Unlock()
		if key == "fail-1" && failed == 0 {
			failed++
			return fmt.Errorf("consumetest: the store is down")
		}
		return nil
	}
	tg.Produce(t, NewMessage("fail-1"))
	Start(t, tg.NewSource(t), rec)
	rec.waitFor(t, f.RedeliveryWait+WaitLimit, "fail-1 was stored after its failed insert", func(seen map[string][]store.InboxInsertResult) bool {
		return len(seen["fail-1"]) >= 1
	})
	mu.Lock()
	if failed != 1 {
		t.Errorf("the insert of fail-1 failed %d times, want the first", failed)
	}
	mu.Unlock()
	wantOneRow(t, tg, "fail-1", "pending")
}

// badBody produces a body that is not JSON, then a good message; the first is a dead row and
// the second is stored after it.
func badBody(t *testing.T, newTarget Constructor) {
	tg := newTarget(t)
	rec := newRecorder(tg.Sink)
	tg.Produce(t, Message{Body: []byte("not json {"), Headers: map[string]string{"x-idempotency-key": "bad-1"}})
	tg.Produce(t, NewMessage("after-bad"))
	Start(t, tg.NewSource(t), rec)
	rec.waitFor(t, WaitLimit, "the bad body and the message after it were stored", func(seen map[string][]store.InboxInsertResult) bool {
		return len(seen["bad-1"]) >= 1 && len(seen["after-bad"]) >= 1
	})
	wantOneRow(t, tg, "bad-1", "dead")
	wantOneRow(t, tg, "after-bad", "pending")
}
