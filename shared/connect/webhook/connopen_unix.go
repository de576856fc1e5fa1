//go:build unix

package webhook

import (
	"errors"
	"net"
	"syscall"
)

// connOpen reports whether c, an idle connection, can carry another request: the server has
// neither closed it nor sent anything on it since the last answer. It peeks at the socket
// without blocking; only "nothing to read yet" counts as open.
func connOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var peekErr error
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, peekErr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	return err == nil && (errors.Is(peekErr, syscall.EAGAIN) || errors.Is(peekErr, syscall.EWOULDBLOCK))
}
