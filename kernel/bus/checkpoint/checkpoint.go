// Package checkpoint keeps what a fold of the event log has derived — the
// agent's run loops, the approvals, the plugin grants — in a file, with the
// seq and id of the last event folded, so that a start folds only what the
// log holds after it instead of the whole history. A checkpoint is a cache,
// never a source of truth: Load checks it against the log (the event at its
// seq must be the one it names) and a checkpoint that is missing, damaged,
// of another version or another log is refused with the reason, and the
// caller folds the log from its start. Why: docs/RATIONALE.md#a-start-reads-what-is-live.
package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// MaxBytes bounds a checkpoint's state: a fold bounded by what is live
// stays far below it, and a larger file is refused, not read.
const MaxBytes = 64 << 20

// magic starts every checkpoint file; the byte after it is the format.
const magic = "KAIROCKP\x01"

// header precedes the state.
type header struct {
	// Version is the fold's own: a fold that changes what it keeps
	// changes its version, and a checkpoint of another version is refused.
	Version int    `msgpack:"version"`
	Seq     uint64 `msgpack:"seq"` // the last event folded; 0: none
	ID      string `msgpack:"id"`  // its id
	Host    string `msgpack:"host,omitempty"`
	Size    int    `msgpack:"size"`
	CRC     uint32 `msgpack:"crc"` // IEEE, of the state
}

// Point is where a fold stands: the last event it folded.
type Point struct {
	Seq uint64
	ID  string
}

// At is the point of ev.
func At(ev *abi.Event) Point { return Point{Seq: ev.Seq, ID: ev.ID} }

// Refused says why a checkpoint was not used; the caller folds the whole
// log and says so.
type Refused struct {
	Path, Why string
}

// Error says which checkpoint was not used, and why.
func (e *Refused) Error() string { return "checkpoint " + e.Path + " not used: " + e.Why }

// Save writes state, folded up to p on host's log, to path: a temp file
// written whole, synced and renamed over the old one, mode 0600, so a
// crash leaves the old checkpoint or the new, never half of one.
func Save(path string, version int, host string, p Point, state any) error {
	body, err := msgpack.Marshal(state)
	if err != nil {
		return fmt.Errorf("checkpoint %s: encode: %w", path, err)
	}
	if len(body) > MaxBytes {
		return fmt.Errorf("checkpoint %s: the state is %d bytes, over the %d a checkpoint holds", path, len(body), MaxBytes)
	}
	head, err := msgpack.Marshal(header{Version: version, Seq: p.Seq, ID: p.ID, Host: host, Size: len(body), CRC: crc32.ChecksumIEEE(body)})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.Grow(len(magic) + 4 + len(head) + len(body))
	buf.WriteString(magic)
	buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(head))))
	buf.Write(head)
	buf.Write(body)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}

// Load reads the checkpoint at path into state and returns the point it
// was folded to, after checking it against b's log: it must be of version
// and of b's host, and the event at its seq must be the one it names. Any
// other checkpoint — missing, damaged, of another version, host or log —
// is a *Refused (state is then left as it was, or partly decoded: the
// caller starts from a fresh one); an error of the log itself is returned
// as it is.
func Load(ctx context.Context, b *bus.Bus, path string, version int, state any) (Point, error) {
	refuse := func(why string, args ...any) (Point, error) {
		return Point{}, &Refused{Path: path, Why: fmt.Sprintf(why, args...)}
	}
	if err := private(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return refuse(noneYet)
		}
		return refuse("%v", err)
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return refuse(noneYet)
	}
	if err != nil {
		return refuse("%v", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxBytes+64<<10 {
		return refuse("not a regular file of at most %d bytes", MaxBytes)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxBytes+64<<10))
	if err != nil {
		return refuse("%v", err)
	}
	if !bytes.HasPrefix(raw, []byte(magic)) || len(raw) < len(magic)+4 {
		return refuse("not a checkpoint of this format")
	}
	raw = raw[len(magic):]
	n := binary.BigEndian.Uint32(raw)
	raw = raw[4:]
	if uint64(n) > uint64(len(raw)) {
		return refuse("damaged: its header is cut short")
	}
	var h header
	if err := msgpack.Unmarshal(raw[:n], &h); err != nil {
		return refuse("damaged header: %v", err)
	}
	body := raw[n:]
	switch {
	case h.Version != version:
		return refuse("of version %d, this kairo folds version %d", h.Version, version)
	case h.Host != b.Host():
		return refuse("of host %q, this kairo is %q", h.Host, b.Host())
	case h.Size != len(body) || crc32.ChecksumIEEE(body) != h.CRC:
		return refuse("damaged: its state does not match its checksum")
	}
	if h.Seq > 0 {
		found := false
		err := b.Replay(ctx, bus.Query{FromSeq: h.Seq, ToSeq: h.Seq, Limit: 1}, func(ev *abi.Event) error {
			found = ev.Seq == h.Seq && ev.ID == h.ID
			return bus.ErrStop
		})
		if err != nil && !errors.Is(err, bus.ErrStop) {
			var gap *bus.GapError
			if errors.As(err, &gap) {
				return refuse("its event %d is gone from the store", h.Seq)
			}
			return Point{}, err
		}
		if !found {
			return refuse("the log's event %d is not the one it was folded to (%s): another log, or one rewritten", h.Seq, h.ID)
		}
	} else if h.ID != "" {
		return refuse("damaged: no seq for event %s", h.ID)
	}
	if err := msgpack.Unmarshal(body, state); err != nil {
		return refuse("its state does not decode: %v", err)
	}
	return Point{Seq: h.Seq, ID: h.ID}, nil
}
