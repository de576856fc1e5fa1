// Package freezeproxy is a TCP proxy for the tests of the Go pull client that imitates a
// network partition between a worker and its database: when frozen it stops passing bytes in
// both directions, on every connection, without closing any of them, and holds new
// connections unanswered; when thawed it passes everything it held, in order. It can also
// freeze itself at an exact point: when the server sends bytes that hold a marker, or just
// after the client sent bytes that hold one, so a test can hold back the answer of one
// statement that the server runs.
// It is internal: the library does not import it.
package freezeproxy

import (
	"bytes"
	"fmt"
	"net"
	"sync"
)

// Proxy forwards the TCP connections made to Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	thawed chan struct{} // nil while the proxy passes bytes; closed by Thaw
	marker []byte        // freeze when the server sends these bytes; nil for none
	after  []byte        // freeze once the client has sent these bytes; nil for none
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free port of 127.0.0.1 and forwards each connection to target
// (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("freezeproxy: listening: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the host:port to connect to instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops passing bytes, at once, on every connection and for new ones.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.freezeLocked()
}

func (p *Proxy) freezeLocked() {
	if p.thawed == nil {
		p.thawed = make(chan struct{})
	}
}

// FreezeOnReply makes the proxy freeze when the server sends bytes that contain marker (at
// most 256 bytes): the chunk that holds it, and everything after it, waits for Thaw.
func (p *Proxy) FreezeOnReply(marker []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker = bytes.Clone(marker)
}

// FreezeAfterRequest makes the proxy freeze once the client has sent bytes that contain marker
// (at most 256 bytes): the chunk that holds it reaches the server, and the server's answer, like
// everything else, waits for Thaw.
func (p *Proxy) FreezeAfterRequest(marker []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.after = bytes.Clone(marker)
}

// Frozen reports whether the proxy holds the bytes back.
func (p *Proxy) Frozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thawed != nil
}

// Thaw passes the bytes that the proxy held and everything after them, and forgets the
// markers of FreezeOnReply and FreezeAfterRequest.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker, p.after = nil, nil
	if p.thawed != nil {
		close(p.thawed)
		p.thawed = nil
	}
}

// Close thaws the proxy, stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.Thaw()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// gate waits while the proxy is frozen. fromServer says which way chunk goes; a chunk from
// the server that holds the marker freezes the proxy first. It reports false once the proxy
// is closed.
func (p *Proxy) gate(chunk []byte, fromServer bool) bool {
	p.mu.Lock()
	if fromServer && p.marker != nil && bytes.Contains(chunk, p.marker) {
		p.marker = nil
		p.freezeLocked()
	}
	wait, closed := p.thawed, p.closed
	p.mu.Unlock()
	if wait != nil {
		<-wait
	}
	return !closed
}

// sent freezes the proxy when the bytes that the client has just sent hold the marker of
// FreezeAfterRequest.
func (p *Proxy) sent(chunk []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.after != nil && bytes.Contains(chunk, p.after) {
		p.after = nil
		p.freezeLocked()
	}
}

// track remembers c so that Close can close it; it reports false when the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			_ = client.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve connects one client to the target once the proxy is not frozen, then copies both
// ways through the gate.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer client.Close()
	if !p.gate(nil, false) {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	if !p.track(server) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, false); done <- struct{}{} }()
	go func() { p.pipe(client, server, true); done <- struct{}{} }()
	<-done
	// One side ended. Across a partition the other side does not learn it: end it only once
	// the proxy passes bytes again.
	p.gate(nil, false)
	_ = client.Close()
	_ = server.Close()
	<-done
}

// pipe copies src to dst, a chunk at a time, each through the gate. The gate sees the end of
// the previous chunk too, so that a marker split between two reads is found.
func (p *Proxy) pipe(dst, src net.Conn, fromServer bool) {
	buf := make([]byte, 32*1024)
	var seen []byte
	for {
		n, err := src.Read(buf)
		if n > 0 {
			seen = append(seen, buf[:n]...)
			if !p.gate(seen, fromServer) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if !fromServer {
				p.sent(seen)
			}
			if keep := 256; len(seen) > keep {
				seen = append(seen[:0], seen[len(seen)-keep:]...)
			}
		}
		if err != nil {
			return
		}
	}
}
