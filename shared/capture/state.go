package capture

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/changes"
)

// The files of the state directory that the connector writes (spec/08-capture-changes.md). A
// Source may keep files of its own there under other names (the SQL Server source's
// history.dat, cdc.HistoryFile).
const (
	// OffsetsFile holds the log position that capture has handled.
	OffsetsFile = "offsets.dat"
	// IdentityFile holds the state_id that ties the files to the row of
	// queuebox_capture_state.
	IdentityFile = "identity"
)

// StateTable is the table that records each capture identity (migration V7).
const StateTable = store.CaptureStateTable

// Offsets is the content of offsets.dat: a small JSON document.
type Offsets struct {
	// LSN is the log position up to which every change was handled, in the form of the
	// Source's Log.FormatPosition (PostgreSQL's X/Y form).
	LSN string `json:"lsn"`
	// Slot and Publication name what the position belongs to, for the operator's eyes.
	Slot        string `json:"slot"`
	Publication string `json:"publication"`
	// UpdatedAt is when the file was written, RFC 3339.
	UpdatedAt string `json:"updatedAt"`
}

// files reads and writes the state directory.
type files struct {
	dir string
	log changes.Log // reads and writes the positions
}

// readIdentity returns the state_id of the identity file, or "" when there is none.
func (f files) readIdentity() (string, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, IdentityFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the capture identity file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// readOffsets returns the handled position of offsets.dat; ok is false when the file does not
// exist.
func (f files) readOffsets() (lsn changes.Position, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(f.dir, OffsetsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading %s: %w", OffsetsFile, err)
	}
	var o Offsets
	if err := json.Unmarshal(b, &o); err != nil {
		return "", false, fmt.Errorf("reading %s: %w", OffsetsFile, err)
	}
	lsn, err = f.log.ParsePosition(o.LSN)
	if err != nil {
		return "", false, fmt.Errorf("reading %s: the position %q: %w", OffsetsFile, o.LSN, err)
	}
	return lsn, true, nil
}

// writeIdentity writes the identity file.
func (f files) writeIdentity(stateID string) error {
	if err := writeAtomic(f.dir, IdentityFile, []byte(stateID+"\n")); err != nil {
		return fmt.Errorf("writing the capture identity file: %w", err)
	}
	return nil
}

// writeOffsets records the handled position.
func (f files) writeOffsets(lsn changes.Position, slot, publication string) error {
	b, _ := json.Marshal(Offsets{LSN: f.log.FormatPosition(lsn), Slot: slot, Publication: publication,
		UpdatedAt: time.Now().UTC().Format(time.RFC3339Nano)})
	if err := writeAtomic(f.dir, OffsetsFile, append(b, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", OffsetsFile, err)
	}
	return nil
}

// writeAtomic writes name in dir through a synced temporary file and a rename, so a crash
// leaves the old or the new content, never a torn one.
func writeAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// newStateID returns a random (version 4) UUID.
func newStateID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
