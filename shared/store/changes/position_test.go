package changes_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/alternayte/queuebox/shared/store/changes"
)

// A 64-bit LSN is 8 big-endian bytes, so positions order as numbers; 0 is no position.
func TestPositionOf(t *testing.T) {
	t.Parallel()
	assert.Equal(t, changes.Position(""), changes.PositionOf(0))
	assert.Equal(t, uint64(0), changes.Position("").Uint64())
	for _, n := range []uint64{1, 255, 256, 1 << 40, ^uint64(0)} {
		assert.Len(t, string(changes.PositionOf(n)), 8)
		assert.Equal(t, n, changes.PositionOf(n).Uint64())
	}
	assert.Less(t, changes.PositionOf(255), changes.PositionOf(256))
	assert.Less(t, changes.PositionOf(1<<40), changes.PositionOf(1<<40+1))
	assert.Less(t, changes.Position(""), changes.PositionOf(1))
}
