package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// A Fold is a fold of the log kept in a checkpoint file. Start loads the
// checkpoint and folds what the log holds after it (the whole log when
// there is none, or it is refused); Save folds what came since and writes
// the state at the point reached. State is built from the log alone, in
// its order: a component that applies its own events as it publishes them
// keeps its live state apart, so the point of a checkpoint is always a seq
// up to which every event was folded.
type Fold[S any] struct {
	Bus     *bus.Bus
	Path    string // the checkpoint file; "": none (a log with no data folder)
	Version int    // the fold's; see [Save]
	// Subjects are the events the fold reads; the others pass by.
	Subjects []*abi.Pattern
	// Apply folds ev, one of Subjects, into s. ev's bytes are the store's
	// until it returns.
	Apply func(s *S, ev *abi.Event)
	// Verify, when set, checks a loaded state against the log before it is
	// used: a reason it returns refuses the checkpoint.
	Verify func(ctx context.Context, s *S) error
	Logger *slog.Logger

	mu    sync.Mutex // one fold at a time
	state S
	point Point
	saved Point
	read  uint64 // events read, by every fold so far
}

// Start folds the log into a fresh state, from the checkpoint when one is
// there and the log agrees with it. f.Logger is told why one was not used.
func (f *Fold[S]) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Path != "" {
		var s S
		p, err := Load(ctx, f.Bus, f.Path, f.Version, &s)
		if err == nil && f.Verify != nil {
			if why := f.Verify(ctx, &s); why != nil {
				err = &Refused{Path: f.Path, Why: why.Error()}
			}
		}
		var r *Refused
		switch {
		case err == nil:
			f.state, f.point, f.saved = s, p, p
		case errors.As(err, &r) && r.Why == noneYet:
			f.logger().Info("the log is folded from its start", "why", err.Error())
		case errors.As(err, &r):
			f.logger().Warn("the log is folded from its start", "why", err.Error())
		default:
			return err
		}
	}
	return f.foldLocked(ctx)
}

// State calls fn with the state, folded up to the point; fn must not keep
// it or call f.
func (f *Fold[S]) State(fn func(s *S)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.state)
}

// Point is where the fold stands.
func (f *Fold[S]) Point() Point {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.point
}

// Read counts the events the fold has read from the log.
func (f *Fold[S]) Read() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.read
}

// Save folds what the log holds since the point and writes the checkpoint,
// unless nothing was folded since the last.
func (f *Fold[S]) Save(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.foldLocked(ctx); err != nil {
		return err
	}
	if f.Path == "" || f.point == f.saved {
		return nil
	}
	if err := Save(f.Path, f.Version, f.Bus.Host(), f.point, &f.state); err != nil {
		return err
	}
	f.saved = f.point
	return nil
}

// Keep saves the fold every period, off the path of any call, until stop;
// stop saves it a last time (the bus must still be open) and returns once
// the goroutine has ended.
func (f *Fold[S]) Keep(period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := f.Save(ctx); err != nil && ctx.Err() == nil {
					f.logger().Warn("a checkpoint was not saved; the next start folds more of the log", "path", f.Path, "err", err)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := f.Save(sctx); err != nil {
				f.logger().Warn("the checkpoint was not saved at stop; the next start folds more of the log", "path", f.Path, "err", err)
			}
		})
	}
}

// foldLocked folds the events after the point up to the log's last: every
// event up to it is stored (the store assigns seqs in order), so the point
// it ends on has nothing before it left unread.
func (f *Fold[S]) foldLocked(ctx context.Context) error {
	last := f.Bus.LastSeq()
	if last <= f.point.Seq {
		return nil
	}
	var id []byte
	seq := f.point.Seq
	err := f.Bus.Replay(ctx, bus.Query{FromSeq: f.point.Seq + 1, ToSeq: last}, func(ev *abi.Event) error {
		f.read++
		for _, p := range f.Subjects {
			if p.Match(ev.Type) {
				f.Apply(&f.state, ev)
				break
			}
		}
		seq, id = ev.Seq, append(id[:0], ev.ID...)
		return nil
	})
	if seq > f.point.Seq {
		// What was folded stays folded, even when the scan stopped short.
		f.point = Point{Seq: seq, ID: string(id)}
	}
	if err != nil {
		return fmt.Errorf("fold the log from %d: %w", f.point.Seq+1, err)
	}
	return nil
}

func (f *Fold[S]) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}
