package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/smalldisk"
)

// A disk that fills while events are published, on a real tmpfs: the bus
// refuses with an error that says the disk is full and what to do, serves
// reads and subscriptions meanwhile, records kairo.system.store.writable
// with the count it refused once space is freed, and takes events again;
// a stop on the full disk is clean, and every acknowledged event is there
// at the next open. The control is the publishing before the disk fills.
func TestStoreFullDisk(t *testing.T) {
	dir := smalldisk.Mount(t, 6<<20)
	defer func(d time.Duration) { hook.ProbeInterval = d }(hook.ProbeInterval)
	hook.ProbeInterval = 20 * time.Millisecond
	path := filepath.Join(dir, "events.db")
	b := bus.New(openSQLite(t, path), bus.Config{})
	closed := false
	defer func() {
		if !closed {
			b.Close()
		}
	}()
	var mu sync.Mutex
	var live []abi.Event
	sub, err := b.Subscribe(context.Background(), bus.SubjectStoreWritable, bus.SubscribeConfig{}, func(evs []abi.Event) error {
		mu.Lock()
		live = append(live, evs...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	acked := map[string]uint64{}
	publish := func(i int) error {
		ev := &abi.Event{Type: "test.full", Data: bustest.Payload(t, 200+i%100)}
		res, err := b.Publish(context.Background(), ev)
		if err == nil {
			acked[ev.ID] = res.Seq
		}
		return err
	}
	for i := range 200 { // the control
		if err := publish(i); err != nil {
			t.Fatalf("publish %d on a disk with room: %v", i, err)
		}
	}
	free := smalldisk.Fill(t, dir)
	var full *bus.DiskFullError
	for i := 0; ; i++ {
		err := publish(i)
		if errors.As(err, &full) {
			break
		}
		if err != nil {
			t.Fatalf("publish on a full disk: %v; want a DiskFullError", err)
		}
		if i > 200_000 {
			t.Fatal("a full disk never refused an event")
		}
	}
	for _, want := range []string{path, "is full", "free space"} {
		if !strings.Contains(full.Error(), want) {
			t.Errorf("the refusal %q does not say %q", full, want)
		}
	}
	publish(0) // a second refusal
	since, refused := b.Full()
	if since.IsZero() || refused < 2 {
		t.Fatalf("Full() = %v, %d while the disk is full", since, refused)
	}
	n := 0
	if err := b.Replay(context.Background(), bus.Query{}, func(*abi.Event) error { n++; return nil }); err != nil || n != len(acked) {
		t.Fatalf("replay on a full disk read %d of %d events: %v", n, len(acked), err)
	}

	free()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := len(live)
		mu.Unlock()
		if got > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no kairo.system.store.writable within 10 s of freeing space")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var w bus.StoreWritable
	if err := msgpack.Unmarshal(live[0].Data, &w); err != nil || w.Refused != refused || !w.FullSince.Equal(since) {
		t.Fatalf("writable event %+v (%v), want %d refused since %v", w, err, refused, since)
	}
	if s, _ := b.Full(); !s.IsZero() {
		t.Fatal("the bus still says the disk is full")
	}
	if err := publish(1); err != nil {
		t.Fatalf("publish once space is back: %v", err)
	}

	free = smalldisk.Fill(t, dir)
	closed = true
	if err := b.Close(); err != nil {
		t.Fatalf("a stop on a full disk: %v", err)
	}
	free()
	s := openSQLite(t, path)
	defer s.Close()
	stored := map[string]uint64{}
	s.Scan(context.Background(), bus.Query{}, func(ev *abi.Event) error { stored[ev.ID] = ev.Seq; return nil })
	for id, seq := range acked {
		if stored[id] != seq {
			t.Fatalf("acknowledged event %s (seq %d) is stored at %d after the full disk", id, seq, stored[id])
		}
	}
}

// A store on a disk that is already full opens, with the reserve it kept
// released: reads work and appends are refused until space is freed, when
// the reserve is written back first. The control is the same store opened
// with room. Without a reserve, the open says the disk is full.
func TestStoreOpensOnFullDisk(t *testing.T) {
	dir := smalldisk.Mount(t, 6<<20)
	path := filepath.Join(dir, "events.db")
	s := openSQLite(t, path)
	bustest.AppendN(t, s, 0, 100)
	s.Close()
	if fi, err := os.Stat(reservePath(path)); err != nil || fi.Size() != reserveSize {
		t.Fatalf("no reserve beside the store: %v", err)
	}
	s = openSQLite(t, path) // the control
	bustest.AppendN(t, s, 100, 1)
	s.Close()

	free := smalldisk.Fill(t, dir)
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	n := 0
	s.Scan(context.Background(), bus.Query{}, func(*abi.Event) error { n++; return nil })
	if n != 101 {
		t.Fatalf("read %d of 101 events on a full disk", n)
	}
	err = s.Append([]*abi.Event{bustest.StoreEvent(t, "refused", 0)}, nil, make([]bool, 1))
	if !IsDiskFull(err) {
		t.Fatalf("append on a full disk: %v; want no space left", err)
	}
	free()
	bustest.AppendN(t, s, 101, 1)
	if s.LastSeq() != 102 {
		t.Fatalf("LastSeq = %d after the disk had room again", s.LastSeq())
	}
	if fi, err := os.Stat(reservePath(path)); err != nil || fi.Size() != reserveSize {
		t.Fatalf("the reserve was not written back: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// With the reserve gone, there is nothing to release.
	smalldisk.Fill(t, dir)
	os.Remove(reservePath(path))
	smalldisk.Fill(t, dir)
	s, err = Open(path, Config{})
	if err == nil {
		s.Close()
		t.Fatal("a store opened on a full disk with no reserve to release")
	}
	if !strings.Contains(err.Error(), "is full") || !strings.Contains(err.Error(), "free some space") {
		t.Fatalf("open on a full disk without a reserve: %v", err)
	}
}
