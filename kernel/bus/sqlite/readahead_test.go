package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// A packConn's readahead holds bytes of one read transaction only: a pack
// rewritten in place between two reads, its overflow pages checkpointed
// into the main file where they were, is read again, not served from the
// window of the read before. The control is the first read, equal to the
// driver's.
func TestReadaheadDroppedBetweenReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openSQLite(t, path)
	defer s.Close()
	const n, probe = 100, 1
	payload := append([]byte{0xd9, 200}, bytes.Repeat([]byte("A"), 200)...) // a msgpack string
	evs := make([]*abi.Event, n)
	for i := range evs {
		evs[i] = &abi.Event{ID: fmt.Sprintf("ra-%d", i+1), Type: "kairo.ra", Source: "test", Time: time.Unix(0, int64(i+1)), Data: payload}
	}
	if err := s.Append(evs, nil, make([]bool, n)); err != nil {
		t.Fatal(err)
	}
	// The file past one window, in events of their own rows after the
	// pack: the pack's pages stay in the first window with the file's
	// header and the packs' one b-tree page.
	big := append([]byte{0xda, 0x08, 0x00}, bytes.Repeat([]byte("C"), 2048)...)
	for i := range 60 {
		ev := &abi.Event{ID: fmt.Sprintf("ra-big-%d", i), Type: "kairo.ra", Source: "test", Time: time.Unix(0, int64(n+1+i)), Data: big}
		if err := s.Append([]*abi.Event{ev}, nil, make([]bool, 1)); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint := func() {
		if _, err := s.cdb.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint()
	pc, err := openPackConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.close()
	conn, err := s.rdb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		viaDriver := &reader{dc: dc}
		defer viaDriver.close()
		viaLib := &reader{dc: dc, pc: pc}
		read := func() error {
			q := bus.Query{}
			got, err := readRange(context.Background(), viaLib, true, &q, nil, probe, probe)
			if err != nil {
				return err
			}
			want, err := readRange(context.Background(), viaDriver, true, &q, nil, probe, probe)
			if err != nil {
				return err
			}
			if len(got) != 1 || !reflect.DeepEqual(got, want) {
				return fmt.Errorf("event %d: the packConn read %d events, the driver %d, or they differ", probe, len(got), len(want))
			}
			return nil
		}
		if err := read(); err != nil {
			return fmt.Errorf("before the rewrite (the control): %w", err)
		}
		// The pack of event probe, its A's made B's: as long as it was,
		// SQLite overwrites its pages in place.
		var first int64
		var blob []byte
		s.mu.Lock() // the writer's connection
		defer s.mu.Unlock()
		if err := s.w.QueryRowContext(context.Background(), `SELECT first_seq, envs FROM packs WHERE first_seq <= ? AND last_seq >= ?`, probe, probe).Scan(&first, &blob); err != nil {
			return err
		}
		blob = bytes.ReplaceAll(blob, []byte("AAAAAAAA"), []byte("BBBBBBBB"))
		if _, err := s.w.ExecContext(context.Background(), `UPDATE packs SET envs = ? WHERE first_seq = ?`, blob, first); err != nil {
			return err
		}
		checkpoint()
		if err := read(); err != nil {
			return fmt.Errorf("after the rewrite: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
