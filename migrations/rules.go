package migrations

import (
	"hash/crc32"
	"io"
	"strings"
)

// The two rules that the runner (shared/migrate) and the dialect drivers read the files by:
// Flyway's checksum, written to the history, and sqlcmd's batch split of the SQL Server files.

// Checksum returns Flyway's checksum of a migration file: CRC-32 (IEEE) over the file's lines
// without their line terminators ("\n", "\r\n" or "\r"), after dropping a leading UTF-8 byte
// order mark, as a signed 32-bit number. It equals the CRC-32 of the text with every "\r" and
// "\n" removed.
func Checksum(sql string) int32 {
	s := strings.TrimPrefix(sql, "\uFEFF")
	h := crc32.NewIEEE()
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			_, _ = io.WriteString(h, s)
			break
		}
		_, _ = io.WriteString(h, s[:i])
		s = s[i+1:]
	}
	return int32(h.Sum32())
}

// SplitBatches splits a SQL Server file into the batches that sqlcmd would send: a line whose
// only content, apart from blanks, is GO (in any letter case) ends a batch, and the text after
// the last such line is the last batch. Batches that hold only blanks and -- comments are
// dropped. The files hold no GO with a count, no block comment and no string that spans a GO
// line; the tests of this package check this.
func SplitBatches(sql string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		b := cur.String()
		cur.Reset()
		if hasStatement(b) {
			out = append(out, strings.TrimSpace(b))
		}
	}
	for _, line := range strings.SplitAfter(strings.TrimPrefix(sql, "\uFEFF"), "\n") {
		if strings.EqualFold(strings.TrimSpace(line), "GO") {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return out
}

// hasStatement reports whether a batch holds more than blanks and -- comments.
func hasStatement(b string) bool {
	for _, line := range strings.Split(b, "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "--") {
			return true
		}
	}
	return false
}
