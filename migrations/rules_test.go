package migrations_test

import (
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/migrations"
)

func TestChecksumIsFlywaysLineChecksum(t *testing.T) {
	t.Parallel()
	fox := "The quick brown fox jumps over the lazy dog"
	require.Equal(t, uint32(0x414FA339), crc32.ChecksumIEEE([]byte(fox)), "the IEEE table")
	tests := []struct {
		name string
		in   string
		want int32
	}{
		{"empty", "", 0},
		{"one line", fox, int32(0x414FA339)},
		{"line ends are not counted", "The quick brown fox\njumps over the lazy dog\n", int32(crc32.ChecksumIEEE([]byte("The quick brown foxjumps over the lazy dog")))},
		{"CRLF and CR count like LF", "The quick brown fox\r\njumps over the lazy dog\r", int32(crc32.ChecksumIEEE([]byte("The quick brown foxjumps over the lazy dog")))},
		{"byte order mark is dropped", "\uFEFF" + fox, int32(0x414FA339)},
		{"signed like a Java int", "SELECT 1;", int32(crc32.ChecksumIEEE([]byte("SELECT 1;")))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, migrations.Checksum(tc.in))
		})
	}
}
