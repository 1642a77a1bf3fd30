package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus/internal/hook"
)

// SubjectStoreWritable is published once the store takes events again
// after the disk it is on filled up: how long it refused and how many.
const SubjectStoreWritable = abi.SubjectSystemStoreWritable

// StoreWritable is the data of [SubjectStoreWritable].
type StoreWritable struct {
	Store     string    `msgpack:"store"`
	FullSince time.Time `msgpack:"fullSince"`
	Refused   uint64    `msgpack:"refused"` // events refused while it was full
}

// IsDiskFull reports whether err is the file system's "no space left"
// (ENOSPC, or EDQUOT for a quota). A driver makes its own kind of full
// (SQLite's SQLITE_FULL, a stream at its max_bytes) match [syscall.ENOSPC],
// so that the bus degrades the same way for every store.
func IsDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// DiskFullError is what a publish gets while the disk of the store is full.
type DiskFullError struct {
	Store string
	Since time.Time
	Err   error
}

// Error says the event was not stored, since when the disk is full, and
// that publishing resumes by itself once there is space.
func (e *DiskFullError) Error() string {
	return fmt.Sprintf("the disk of the event store (%s) is full since %s: the event was not stored; free space and publishing resumes by itself (reads and subscriptions still work): %v",
		e.Store, e.Since.Format(time.TimeOnly), e.Err)
}

// Unwrap is the store's own error: one [IsDiskFull] recognises.
func (e *DiskFullError) Unwrap() error { return e.Err }

// fullState is the bus's view of a store whose disk is full.
type fullState struct {
	mu      sync.Mutex
	since   time.Time // zero while the store takes writes
	refused uint64
	// total counts every refusal since New, never reset: Stats.
	total   uint64
	probing bool
	stop    chan struct{}
	done    chan struct{} // of the latest probe; nil before the first
}

// noteFull records a refusal for want of space and starts the probe that
// reports the store writable again. The caller holds b.mu.
func (b *Bus) noteFull(evs []*abi.Event, err error) error {
	f := &b.full
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since.IsZero() {
		f.since = time.Now()
	}
	for _, ev := range evs {
		if ev.Type != SubjectStoreWritable { // the probe's own tries are not refusals
			f.refused++
			f.total++
		}
	}
	if !f.probing && !b.closed.Load() {
		// A probe per episode of a full disk, each with its own done.
		f.probing, f.done = true, make(chan struct{})
		go b.probe(f.done)
	}
	return &DiskFullError{Store: b.store.Describe(), Since: f.since, Err: err}
}

// probe publishes SubjectStoreWritable as soon as the store takes it: the
// first event stored after the disk had room again.
func (b *Bus) probe(done chan<- struct{}) {
	f := &b.full
	defer close(done)
	t := time.NewTicker(hook.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		f.mu.Lock()
		data, _ := msgpack.Marshal(StoreWritable{Store: b.store.Describe(), FullSince: f.since, Refused: f.refused})
		f.mu.Unlock()
		ev := &abi.Event{Type: SubjectStoreWritable, Source: "kernel", Data: data}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := b.Publish(ctx, ev)
		cancel()
		var full *DiskFullError
		switch {
		case err == nil:
			f.mu.Lock()
			f.since, f.refused, f.probing = time.Time{}, 0, false
			f.mu.Unlock()
			return
		case errors.As(err, &full):
		case errors.Is(err, ErrClosed):
			return
		}
	}
}

// Full reports since when the store's disk has been full, and how many
// events it refused; a zero time while it takes events.
func (b *Bus) Full() (since time.Time, refused uint64) {
	b.full.mu.Lock()
	defer b.full.mu.Unlock()
	return b.full.since, b.full.refused
}
