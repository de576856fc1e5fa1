// Package connecttest holds test helpers shared by the connector folders of shared/connect
// that need no broker client and no database driver: a loopback TCP proxy that cuts the
// connections through it, as a broker restart or a network fault would.
package connecttest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards the TCP connections it accepts on a loopback port to a target, and can cut
// them all. It stops, and closes every connection, when the test ends.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	count  int
	wg     sync.WaitGroup
}

// Listen starts a proxy on 127.0.0.1 at a free port that forwards each connection to target
// (host:port); it fails the test when it cannot listen.
func Listen(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("connecttest: listening: %v", err)
	}
	p := &Proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted is the number of connections the proxy has forwarded so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// Cut closes every connection through the proxy, both sides; the proxy goes on accepting
// new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// serve accepts connections until the listener closes, and pipes each to a new connection
// to the target; a connection whose target does not answer is closed.
func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.count++
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies src to dst until either fails; when src ends it closes dst, so that the other
// direction ends too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}
