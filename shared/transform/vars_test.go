package transform

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFormatTimestamp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), "2026-05-01T12:00:00Z"},
		{time.Date(2026, 5, 1, 12, 0, 0, 250_000_000, time.UTC), "2026-05-01T12:00:00.250Z"},
		{time.Date(2026, 5, 1, 12, 0, 0, 123_456_000, time.UTC), "2026-05-01T12:00:00.123456Z"},
		{time.Date(2026, 5, 1, 12, 0, 0, 1, time.UTC), "2026-05-01T12:00:00.000000001Z"},
		{time.Date(2026, 5, 1, 14, 30, 5, 0, time.FixedZone("CEST", 2*3600)), "2026-05-01T12:30:05Z"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, FormatTimestamp(tt.in))
	}
}
