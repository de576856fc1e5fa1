package changes

import "encoding/binary"

// Position is a position in a source's change log: the big-endian bytes of the source's log
// sequence number, of one width per source (8 bytes for a PostgreSQL LSN, PositionOf; the 10
// bytes of a SQL Server binary(10) LSN). Positions of one source therefore order as their
// strings do: a later change has a higher position. The empty Position is no position.
type Position string

// PositionOf returns the Position of a 64-bit log sequence number (PostgreSQL's LSN): its 8
// big-endian bytes, or the empty Position for 0.
func PositionOf(n uint64) Position {
	if n == 0 {
		return ""
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return Position(b[:])
}

// Uint64 returns the 64-bit log sequence number of a Position that PositionOf made (0 for the
// empty Position). A longer Position keeps its last 8 bytes.
func (p Position) Uint64() uint64 {
	var b [8]byte
	if len(p) >= 8 {
		copy(b[:], p[len(p)-8:])
	} else {
		copy(b[8-len(p):], p)
	}
	return binary.BigEndian.Uint64(b[:])
}
