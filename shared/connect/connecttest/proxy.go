// Package connecttest holds test helpers shared by the connector folders of shared/connect,
// and by any test that needs a network fault between a client and a server: a loopback TCP
// proxy that cuts the connections through it, as a broker restart or a network fault would,
// or freezes them, as a network partition does. It needs no broker client and no database
// driver.
package connecttest

import (
	"fmt"
	"net"
	"sync"
	"testing"
)

// Proxy forwards the TCP connections it accepts on a loopback port to a target, and can cut
// them all, or freeze them. It stops, and closes every connection, when the test ends.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	count  int
	wg     sync.WaitGroup
	// thawed is closed while the proxy passes bytes; Freeze replaces it with an open
	// channel, which Thaw closes.
	thawed    chan struct{}
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// Listen starts a proxy on 127.0.0.1 at a free port that forwards each connection to target
// (host:port), and closes it when the test ends; it fails the test when it cannot listen.
func Listen(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Start starts a proxy on 127.0.0.1 at a free port that forwards each connection to target
// (host:port), for a program that is not a test (the chaos suite). Close stops it.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("connecttest: listening: %w", err)
	}
	p := &Proxy{ln: ln, target: target, thawed: make(chan struct{}), done: make(chan struct{})}
	close(p.thawed)
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Close stops accepting, closes every connection (a frozen proxy drops what it holds) and
// waits for the proxy's goroutines. Close may be called more than once.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		_ = p.ln.Close()
		close(p.done)
		p.Cut()
		p.wg.Wait()
	})
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

// Freeze stops passing bytes through the proxy, in both directions, without closing any
// connection: a network partition. Each side's writes still succeed (the proxy reads and
// holds them, as the network's buffers would), nothing reaches the other side, and a side
// that closes its connection is not seen closing by the other. New connections are accepted
// and frozen too. Thaw passes everything held, in order. Freeze of a frozen proxy does
// nothing.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

// Thaw ends a Freeze: the bytes and closes held meanwhile pass, in order, and the proxy
// forwards again. Thaw of a proxy that is not frozen does nothing.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// waitThawed waits until the proxy is not frozen; it returns false when the proxy closed.
func (p *Proxy) waitThawed() bool {
	p.mu.Lock()
	thawed := p.thawed
	p.mu.Unlock()
	select {
	case <-thawed:
		return true
	case <-p.done:
		return false
	}
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
// direction ends too. While the proxy is frozen, what it read (data or the end of src) waits.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.waitThawed() {
			_ = dst.Close()
			return
		}
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
