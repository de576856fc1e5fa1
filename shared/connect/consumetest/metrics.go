package consumetest

import (
	"sync/atomic"

	"github.com/alternayte/queuebox/shared/inbox"
)

// Metrics counts what a source reports outside spec/28's families (inbox.SourceMetrics); the
// measurements of spec/28 it discards. Give it to a source as IntakeOptions.Metrics.
type Metrics struct {
	inbox.NopMetrics
	// Undecodable, TooLarge and Tombstones count InboxUndecodable, InboxTooLarge and
	// InboxTombstoneSkipped.
	Undecodable, TooLarge, Tombstones atomic.Int64
}

var _ inbox.SourceMetrics = (*Metrics)(nil)

// InboxUndecodable implements inbox.SourceMetrics.
func (m *Metrics) InboxUndecodable(string) { m.Undecodable.Add(1) }

// InboxTooLarge implements inbox.SourceMetrics.
func (m *Metrics) InboxTooLarge(string) { m.TooLarge.Add(1) }

// InboxTombstoneSkipped implements inbox.SourceMetrics.
func (m *Metrics) InboxTombstoneSkipped(string) { m.Tombstones.Add(1) }
