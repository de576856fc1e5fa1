package inbox

// WritersIdle reports whether no storage writer of the handler runs and no row is queued.
func (h *Handler) WritersIdle() bool { return h.batch.idle() }

// QueuedRows returns the number of rows that wait for a storage writer.
func (h *Handler) QueuedRows() int {
	h.batch.mu.Lock()
	defer h.batch.mu.Unlock()
	return len(h.batch.queue)
}
