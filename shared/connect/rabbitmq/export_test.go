//go:build !queuebox_no_rabbitmq

package rabbitmq

// DropConnection closes the current AMQP connection of p behind its back, as a broker restart
// or a network failure would, and reports whether there was one.
func DropConnection(p *Publisher) bool {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	if conn == nil {
		return false
	}
	_ = conn.conn.Close()
	return true
}
