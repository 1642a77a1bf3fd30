package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
)

// A long scan's packConn reads the packs as the driver does: the same
// events, for every range, with and without a pattern; and a damaged
// file's error through it is damage, as the driver's is.
func TestPackConnReadsAsTheDriver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openSQLite(t, path)
	defer s.Close()
	const n = 2*scanChunk + 300
	evs := make([]*abi.Event, n)
	for i := range evs {
		typ := "kairo.pc.odd"
		if i%2 == 0 {
			typ = "kairo.pc.even"
		}
		evs[i] = &abi.Event{ID: fmt.Sprintf("pc-%d", i+1), Type: typ, Source: "test", Time: time.Unix(0, int64(i+1)), Data: bustest.Payload(t, i), CorrelationID: "corr"}
	}
	for i := 0; i < n; i += 1000 {
		k := min(1000, n-i)
		if err := s.Append(evs[i:i+k], nil, make([]bool, k)); err != nil {
			t.Fatal(err)
		}
	}
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
	pattern := abi.MustCompilePattern("kairo.pc.even")
	err = conn.Raw(func(dc any) error {
		viaDriver := &reader{dc: dc}
		defer viaDriver.close()
		viaLib := &reader{dc: dc, pc: pc}
		for _, r := range [][2]uint64{{1, n}, {1, 1}, {2, 130}, {127, 129}, {scanChunk, scanChunk + 5000}, {n - 1, n}} {
			for _, q := range []bus.Query{{}, {Pattern: pattern}} {
				want, err := readRange(context.Background(), viaDriver, true, &q, nil, r[0], r[1])
				if err != nil {
					return err
				}
				got, err := readRange(context.Background(), viaLib, true, &q, nil, r[0], r[1])
				if err != nil {
					return err
				}
				if len(want) == 0 || !reflect.DeepEqual(got, want) {
					return fmt.Errorf("seqs %d to %d, pattern %v: the packConn read %d events, the driver %d, or they differ", r[0], r[1], q.Pattern, len(got), len(want))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ExplainDamage(&libError{code: 11, msg: "database disk image is malformed"}, path); !errors.Is(err, ErrDamaged) {
		t.Fatalf("SQLITE_CORRUPT through a packConn: %v, want ErrDamaged", err)
	}
}

// A long scan, whose workers read the packs on connections of their own,
// meets a damaged page of packs as an error that ExplainDamage names
// damage, not as missing events; the control is the same scan of the same
// store before the damage, which reads every event.
func TestLongScanDamagedPack(t *testing.T) {
	defer func(n int64, d time.Duration) { quickCheckWhole, checkBehindAfter = n, d }(quickCheckWhole, checkBehindAfter)
	quickCheckWhole, checkBehindAfter = 0, time.Hour // opened, checked later
	path := filepath.Join(t.TempDir(), "events.db")
	const n = 5 * scanChunk // two workers: a long scan
	fillStore(t, path, n)
	scan := func() (int, error) {
		s := openSQLite(t, path)
		defer s.Close()
		if !s.packed {
			t.Fatal("the store has no packs")
		}
		got := 0
		err := s.Scan(context.Background(), bus.Query{}, func(*abi.Event) error { got++; return nil })
		return got, err
	}
	if got, err := scan(); err != nil || got != n {
		t.Fatalf("the sound store (the control): %d of %d events, %v", got, n, err)
	}
	damagePage(t, path, packPage(t, path))
	got, err := scan()
	if err == nil || got >= n {
		t.Fatalf("the damaged store: %d of %d events and no error", got, n)
	}
	if d := ExplainDamage(err, path); !errors.Is(d, ErrDamaged) {
		t.Fatalf("the damaged store's scan: %v, want an error ExplainDamage names damage", err)
	}
}
