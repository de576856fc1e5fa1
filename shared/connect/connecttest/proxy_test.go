package connecttest_test

import (
	"bufio"
	"net"
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
