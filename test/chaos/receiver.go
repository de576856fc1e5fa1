package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// Outcomes of one request at the receiver.
const (
	outcomeOK    = "ok"    // answered 200: the delivery is acknowledged
	outcomeFail  = "500"   // answered 500 on purpose
	outcomeStall = "stall" // held past the destination timeout, never acknowledged
	// outcomeGone is a slow delivery whose sender closed the connection before the answer:
	// not acknowledged (the sender stopped the publish).
	outcomeGone = "gone"
)

// arrival is one request that reached the receiver with its whole body.
type arrival struct {
	idx     int // arrival order, from 0
	msgID   string
	key     string
	seq     int
	outcome string
}

// payload is the body of every chaos message: the row's key, its place in the key, and a
// unique id (also the inbox idempotency key).
type payload struct {
	ID  string `json:"id"`
	Key string `json:"k"`
	Seq int    `json:"seq"`
}

// faults are the receiver's answers on purpose: fail500, stall and slow are fractions of
// requests; every request of poisonKey gets 500. A slow request is answered 200 after slowFor,
// unless its sender closes the connection first; it is recorded when it ends (accepted or
// gone), so the record holds the order in which the deliveries were accepted.
type faults struct {
	fail500   float64
	stall     float64
	stallFor  time.Duration
	slow      float64
	slowFor   time.Duration
	poisonKey string
}

// receiver records every delivery: X-Message-Id, key, payload sequence number and outcome.
// An acknowledgement is recorded before the 200 is written, so QueueBox can never see a 200
// that the record does not hold.
type receiver struct {
	f   faults
	srv *http.Server
	url string

	mu       sync.Mutex
	rng      *rand.Rand
	arrivals []arrival
	bad      int // requests whose body was not a chaos payload
	// slowEnded counts the slow deliveries by how they ended: outcomeOK or outcomeGone.
	slowEnded map[string]int
}

// startReceiver listens on a free port of 127.0.0.1.
func startReceiver(f faults) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver listen: %w", err)
	}
	r := &receiver{f: f, rng: rand.New(rand.NewPCG(rand.Uint64(), 1)), url: "http://" + ln.Addr().String(), slowEnded: map[string]int{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	if err != nil {
		return // the sender went away mid-body: not a delivery
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil || p.Key == "" {
		r.mu.Lock()
		r.bad++
		r.mu.Unlock()
		http.Error(w, "not a chaos payload", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	outcome := outcomeOK
	switch x := r.rng.Float64(); {
	case p.Key == r.f.poisonKey:
		outcome = outcomeFail
	case x < r.f.stall:
		outcome = outcomeStall
	case x < r.f.stall+r.f.fail500:
		outcome = outcomeFail
	case x < r.f.stall+r.f.fail500+r.f.slow:
		r.mu.Unlock()
		r.serveSlow(w, req, p)
		return
	}
	r.arrivals = append(r.arrivals, arrival{idx: len(r.arrivals), msgID: req.Header.Get("X-Message-Id"), key: p.Key, seq: p.Seq, outcome: outcome})
	r.mu.Unlock()
	switch outcome {
	case outcomeOK:
		w.WriteHeader(http.StatusOK)
	case outcomeFail:
		http.Error(w, "chaos: failing on purpose", http.StatusInternalServerError)
	case outcomeStall:
		t := time.NewTimer(r.f.stallFor)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
		}
		http.Error(w, "chaos: stalled on purpose", http.StatusServiceUnavailable)
	}
}

// serveSlow holds a delivery for slowFor, then accepts it, unless the sender closed the
// connection meanwhile. The delivery is recorded when it ends, so an acceptance that comes
// after a later row of its key was accepted shows in the record as a late delivery.
func (r *receiver) serveSlow(w http.ResponseWriter, req *http.Request, p payload) {
	t := time.NewTimer(r.f.slowFor)
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
	}
	a := arrival{msgID: req.Header.Get("X-Message-Id"), key: p.Key, seq: p.Seq, outcome: outcomeOK}
	r.mu.Lock()
	// Decided under the lock with the record: a sender that left is never recorded as an
	// acknowledgement.
	if req.Context().Err() != nil {
		a.outcome = outcomeGone
	}
	a.idx = len(r.arrivals)
	r.arrivals = append(r.arrivals, a)
	r.slowEnded[a.outcome]++
	r.mu.Unlock()
	if a.outcome == outcomeOK {
		w.WriteHeader(http.StatusOK)
	}
}

// slowCounts returns how many slow deliveries were accepted and how many their sender left.
func (r *receiver) slowCounts() (accepted, gone int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.slowEnded[outcomeOK], r.slowEnded[outcomeGone]
}

// snapshot returns a copy of the record.
func (r *receiver) snapshot() ([]arrival, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]arrival(nil), r.arrivals...), r.bad
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
	_ = r.srv.Close()
}
