//go:build !unix

package webhook

import "net"

// connOpen reports true: without a non-blocking peek, a connection that the server closed
// while it was idle fails the request that uses it, which the outbox retries.
func connOpen(net.Conn) bool { return true }
