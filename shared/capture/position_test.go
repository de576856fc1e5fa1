package capture_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/alternayte/queuebox/shared/capture"
)

// A 64-bit LSN is 8 big-endian bytes, so positions order as numbers; 0 is no position.
func TestPositionOf(t *testing.T) {
	t.Parallel()
	assert.Equal(t, capture.Position(""), capture.PositionOf(0))
	assert.Equal(t, uint64(0), capture.Position("").Uint64())
	for _, n := range []uint64{1, 255, 256, 1 << 40, ^uint64(0)} {
		assert.Len(t, string(capture.PositionOf(n)), 8)
		assert.Equal(t, n, capture.PositionOf(n).Uint64())
	}
	assert.Less(t, capture.PositionOf(255), capture.PositionOf(256))
	assert.Less(t, capture.PositionOf(1<<40), capture.PositionOf(1<<40+1))
	assert.Less(t, capture.Position(""), capture.PositionOf(1))
}
