package connecttest_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/connecttest"
)

// TestProxyForwardsAndCuts runs an echo server behind the proxy: a line comes back through
// it, Cut ends the connection, and a new one is accepted and counted.
func TestProxyForwardsAndCuts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	px := connecttest.Listen(t, ln.Addr().String())
	echo := func(c net.Conn) error {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "ping\n" {
			t.Fatalf("echo = %q, want ping", line)
		}
		return err
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", px.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := dial()
	if err := echo(c); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	px.Cut()
	if err := echo(c); err == nil {
		t.Fatal("the connection still works after Cut")
	}
	if err := echo(dial()); err != nil {
		t.Fatalf("a new connection after Cut: %v", err)
	}
	if got := px.Accepted(); got != 2 {
		t.Errorf("Accepted = %d, want 2", got)
	}
}

// TestProxyFreezeHoldsBytesWithoutClosing: while frozen, a line sent through the proxy gets no
// echo and the connection stays open; Thaw delivers the held line and its echo.
func TestProxyFreezeHoldsBytesWithoutClosing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	got := make(chan string, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					got <- sc.Text()
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
				got <- "closed"
			}()
		}
	}()
	px := connecttest.Listen(t, ln.Addr().String())
	c, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := bufio.NewReader(c)
	if _, err := c.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if line := <-got; line != "one" {
		t.Fatalf("the server read %q, want one", line)
	}
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatalf("the echo of one: %v", err)
	}

	px.Freeze()
	if _, err := c.Write([]byte("two\n")); err != nil {
		t.Fatalf("a write while frozen failed: %v", err)
	}
	// The read waits for a short, bounded while: nothing may arrive, and the connection must
	// not end.
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if line, err := r.ReadString('\n'); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("while frozen the client read %q, %v; want nothing, and the connection open", line, err)
	}
	select {
	case line := <-got:
		t.Fatalf("while frozen the server read %q", line)
	default:
	}

	px.Thaw()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "two\n" {
		t.Fatalf("after Thaw the client read %q, %v; want the held line's echo", line, err)
	}
}
