package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// wirePool sends the deliveries of a destination that no proxy stands in front of, over
// HTTP/1.1 connections of its own. The request and the answer go through the standard
// library's codec (http.Request.Write and http.ReadResponse), so the bytes on the wire are
// those that http.Transport writes for HTTP/1.1 (less its Accept-Encoding: gzip), but in the
// goroutine of the publish: http.Transport hands every request to a writing goroutine and
// every answer over from a reading goroutine of its connection, and without those hand-offs
// a request costs about a quarter less CPU (bench/README.md, "The HTTP client without the
// transport's goroutines"). An https destination negotiates HTTP/1.1 only.
//
// An idle connection is checked before it is used again: one that the server closed while
// it sat idle (its keep-alive timeout) is dropped and another taken or dialled, so that a
// delivery is not failed by a connection that was dead before the request was written. That
// is what http.Transport's reading goroutine gives it.
type wirePool struct {
	addr      string      // host:port that is dialled
	tlsConfig *tls.Config // nil for http
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle   int
	idleFor   time.Duration

	mu    sync.Mutex
	idle  []*wireConn // the most recently used last
	sweep *time.Timer // closes the connections idle for idleFor; nil when none is idle
}

// wireConn is one connection of a wirePool.
type wireConn struct {
	conn      net.Conn // the TLS connection for https
	raw       net.Conn // the TCP connection under it
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// aLongTimeAgo is the deadline that stops the I/O of a connection at once.
var aLongTimeAgo = time.Unix(1, 0)

// maxInformational bounds the 1xx answers read before the final one.
const maxInformational = 5

// earlyAnswerWait bounds the wait for an answer after a write that failed.
const earlyAnswerWait = 50 * time.Millisecond

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// newWirePool returns the pool of connections to target's host.
func newWirePool(target *url.URL, dial func(ctx context.Context, network, addr string) (net.Conn, error), maxIdle int, idleFor time.Duration) *wirePool {
	p := &wirePool{dial: dial, maxIdle: maxIdle, idleFor: idleFor}
	port := target.Port()
	if target.Scheme == "https" {
		p.tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: target.Hostname(), NextProtos: []string{"http/1.1"}}
		if port == "" {
			port = "443"
		}
	} else if port == "" {
		port = "80"
	}
	p.addr = net.JoinHostPort(target.Hostname(), port)
	return p
}

// get returns an idle connection that is still open, or a new one.
func (p *wirePool) get(ctx context.Context, deadline time.Time) (*wireConn, error) {
	now := time.Now()
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if now.Sub(c.idleSince) < p.idleFor && connOpen(c.raw) {
			return c, nil
		}
		_ = c.conn.Close()
	}
	raw, err := p.dial(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	conn := raw
	if p.tlsConfig != nil {
		tc := tls.Client(raw, p.tlsConfig)
		_ = raw.SetDeadline(deadline)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tc
	}
	return &wireConn{conn: conn, raw: raw, br: bufio.NewReaderSize(conn, 4096), bw: bufio.NewWriterSize(conn, 4096)}, nil
}

// put keeps c for the next request, or closes it when the pool is full.
func (p *wirePool) put(c *wireConn) {
	c.idleSince = time.Now()
	p.mu.Lock()
	if len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		_ = c.conn.Close()
		return
	}
	p.idle = append(p.idle, c)
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleFor, p.closeStale)
	}
	p.mu.Unlock()
}

// closeStale closes the connections that have been idle for idleFor, and waits for the next
// one to reach it while any is left.
func (p *wirePool) closeStale() {
	now := time.Now()
	var stale []*wireConn
	p.mu.Lock()
	i := 0
	for i < len(p.idle) && now.Sub(p.idle[i].idleSince) >= p.idleFor {
		i++
	}
	stale = append(stale, p.idle[:i]...)
	p.idle = append(p.idle[:0], p.idle[i:]...)
	if len(p.idle) > 0 {
		p.sweep = time.AfterFunc(p.idleFor-now.Sub(p.idle[0].idleSince), p.closeStale)
	} else {
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, c := range stale {
		_ = c.conn.Close()
	}
}

// closeIdle closes every idle connection.
func (p *wirePool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.conn.Close()
	}
}

// roundTrip writes req on a connection of the pool and reads the answer. It returns when
// the final answer's header has arrived, when deadline passes (the error is then
// context.DeadlineExceeded) or when ctx ends (ctx's error): either stops the connection's I/O
// at once. The response body reads from the connection; closing it gives the connection back
// to the pool when the body was read to its end and the server keeps the connection, and
// closes it otherwise.
func (p *wirePool) roundTrip(ctx context.Context, req *http.Request, deadline time.Time) (*http.Response, error) {
	c, err := p.get(ctx, deadline)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	_ = c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.conn.Close()
		return nil, ioErr(ctx, err)
	}
	werr := req.Write(c.bw)
	if werr == nil {
		werr = c.bw.Flush()
	}
	if werr != nil {
		// A server may answer before it has read the whole request (413 Payload Too Large)
		// and close the connection, which fails the write. Its answer, when it arrived,
		// says more than the write error: read it, as http.Transport does, within a short
		// wait, and close the connection after it.
		if ctx.Err() == nil {
			_ = c.conn.SetReadDeadline(earliest(deadline, time.Now().Add(earlyAnswerWait)))
			if resp, err := http.ReadResponse(c.br, req); err == nil && resp.StatusCode >= 200 {
				resp.Body = &wireBody{body: resp.Body, pool: p, conn: c, stop: stop}
				return resp, nil
			}
		}
		return fail(fmt.Errorf("writing the request: %w", werr))
	}
	var resp *http.Response
	for i := 0; ; i++ {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return fail(fmt.Errorf("reading the response: %w", err))
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if i == maxInformational {
			return fail(fmt.Errorf("reading the response: more than %d informational answers", maxInformational))
		}
	}
	resp.Body = &wireBody{body: resp.Body, pool: p, conn: c, stop: stop,
		reuse: !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols}
	return resp, nil
}

// ioErr returns ctx's error when ctx has ended (the I/O error is then only its effect),
// context.DeadlineExceeded when the connection's deadline passed, and err otherwise.
func ioErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// wireBody is the body of an answer read by wirePool.roundTrip. Close does not read what is
// left of it: the caller reads what it needs first, and a body not read to its end closes
// the connection.
type wireBody struct {
	body  io.ReadCloser
	pool  *wirePool
	conn  *wireConn
	stop  func() bool
	reuse bool
	eof   bool
	done  bool
}

// Read reads the body.
func (b *wireBody) Read(buf []byte) (int, error) {
	if b.done {
		return 0, errors.New("webhook: read of a closed response body")
	}
	n, err := b.body.Read(buf)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close gives the connection back to the pool, or closes it: it is kept only when the body
// was read to its end, ctx did not end, the server keeps the connection and sent nothing
// past the answer.
func (b *wireBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// stop reports false when ctx ended first: the connection's deadline is then in the past.
	if b.stop() && b.eof && b.reuse && b.conn.br.Buffered() == 0 {
		b.pool.put(b.conn)
		return nil
	}
	return b.conn.conn.Close()
}
