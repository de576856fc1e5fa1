//go:build !queuebox_no_rabbitmq

package rabbitmq

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The limits of the AMQP client (amqp091-go) on a field table that it decodes: a table or
// array nested deeper than clientMaxDepth, or holding more than clientMaxEntries entries,
// closes its connection with a syntax error. TestClientTableLimits holds these values to the
// client's behaviour on the real broker.
const (
	clientMaxDepth   = 32
	clientMaxEntries = 8192
)

// errTruncated is a field table whose lengths run past its end.
var errTruncated = errors.New("a length runs past the end of the header table")

// tableProblem walks a field table as the broker sent it (its four-byte length, then its
// entries) without building its values, and returns why the AMQP client cannot decode it: a
// table or array nested deeper than clientMaxDepth, one with more than clientMaxEntries
// entries, a field type that the client does not know, or a length that runs past the end.
// Nil means that the client decodes it. It follows the grammar of AMQP 0-9-1 with RabbitMQ's
// field types, as the client reads them.
func tableProblem(table []byte) error {
	w := walker{b: table}
	return w.table(0)
}

// walker reads a field table from b.
type walker struct {
	b []byte
}

func (w *walker) take(n uint64) ([]byte, error) {
	if n > uint64(len(w.b)) {
		return nil, errTruncated
	}
	out := w.b[:n]
	w.b = w.b[n:]
	return out, nil
}

func (w *walker) u32() (uint32, error) {
	b, err := w.take(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b), nil
}

// table reads a long string of entries: a short string name, then a field value each.
func (w *walker) table(depth int) error {
	if depth > clientMaxDepth {
		return fmt.Errorf("a table or array is nested more than %d levels deep", clientMaxDepth)
	}
	n, err := w.u32()
	if err != nil {
		return err
	}
	if n > 1<<31-1 {
		return fmt.Errorf("a table declares %d bytes", n)
	}
	body, err := w.take(uint64(n))
	if err != nil {
		return err
	}
	inner := walker{b: body}
	// The client keeps the entries in a map: a repeated name does not count twice.
	names := map[string]struct{}{}
	for len(inner.b) > 0 {
		l, err := inner.take(1)
		if err != nil {
			return err
		}
		name, err := inner.take(uint64(l[0]))
		if err != nil {
			return err
		}
		if err := inner.field(depth); err != nil {
			return err
		}
		if len(names) >= clientMaxEntries {
			return fmt.Errorf("a table holds more than %d entries", clientMaxEntries)
		}
		names[string(name)] = struct{}{}
	}
	return nil
}

// array reads a long length, then field values up to it.
func (w *walker) array(depth int) error {
	if depth > clientMaxDepth {
		return fmt.Errorf("a table or array is nested more than %d levels deep", clientMaxDepth)
	}
	n, err := w.u32()
	if err != nil {
		return err
	}
	if n > 1<<31-1 {
		return fmt.Errorf("an array declares %d bytes", n)
	}
	body, err := w.take(uint64(n))
	if err != nil {
		return err
	}
	inner := walker{b: body}
	for count := 0; len(inner.b) > 0; count++ {
		if len(inner.b) == 1 && inner.b[0] != 'V' {
			// A type octet with no value after it: the client reads the end of the array.
			break
		}
		if err := inner.field(depth); err != nil {
			return err
		}
		if count >= clientMaxEntries {
			return fmt.Errorf("an array holds more than %d entries", clientMaxEntries)
		}
	}
	return nil
}

// fixedSizes are the sizes of the field values of a fixed length, by type octet.
var fixedSizes = map[byte]uint64{
	't': 1, 'b': 1, 'B': 1, 's': 2, 'u': 2, 'I': 4, 'i': 4, 'l': 8, 'f': 4, 'd': 8, 'D': 5, 'T': 8, 'V': 0,
}

// field reads one field value of a container at depth.
func (w *walker) field(depth int) error {
	t, err := w.take(1)
	if err != nil {
		return err
	}
	if size, ok := fixedSizes[t[0]]; ok {
		_, err = w.take(size)
		return err
	}
	switch t[0] {
	case 'S', 'x':
		n, err := w.u32()
		if err != nil {
			return err
		}
		if n > 1<<31-1 {
			return fmt.Errorf("a string declares %d bytes", n)
		}
		_, err = w.take(uint64(n))
		return err
	case 'A':
		return w.array(depth + 1)
	case 'F':
		return w.table(depth + 1)
	}
	return fmt.Errorf("a field has the type %q, which the client does not know", t[0])
}
