package bus

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// skipState is the bus's reporting of what its store skipped: a goroutine
// that publishes each report as a SubjectStoreSkipped event and logs it.
type skipState struct {
	kick   chan struct{}
	ctx    context.Context // ends the goroutine and any publish it waits on
	cancel context.CancelFunc
	done   chan struct{}
}

// startSkipReports makes the bus report what its store skips, when the
// store can tell.
func (b *Bus) startSkipReports() {
	r, ok := b.store.(SkipReporter)
	if !ok {
		return
	}
	st := &b.skips
	st.kick, st.done = make(chan struct{}, 1), make(chan struct{})
	st.ctx, st.cancel = context.WithCancel(context.Background())
	go b.reportSkips(r)
	r.OnSkip(func() {
		select {
		case st.kick <- struct{}{}:
		default:
		}
	})
}

// stopSkipReports ends the reporting goroutine and waits for it. Close
// calls it once publishing is refused.
func (b *Bus) stopSkipReports() {
	if b.skips.cancel == nil {
		return
	}
	b.skips.cancel()
	<-b.skips.done
}

func (b *Bus) reportSkips(r SkipReporter) {
	defer close(b.skips.done)
	ctx := b.skips.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.skips.kick:
		}
		reports, dropped := r.TakeSkipped()
		if dropped > 0 {
			reports = append(reports, StoreSkipped{Store: b.store.Describe(), Kind: SkipDropped,
				Reason: fmt.Sprintf("%d more reports of skipped messages were dropped: at most %d are kept between reports", dropped, MaxSkipReports)})
		}
		for i := range reports {
			b.publishSkip(ctx, &reports[i])
		}
	}
}

// publishSkip logs one report and stores it; a report that cannot be
// stored (the store is full or away) is logged only.
func (b *Bus) publishSkip(ctx context.Context, r *StoreSkipped) {
	log := b.opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Warn("the event store skipped what it cannot trust", "kind", r.Kind, "stream_seq", r.Stream, "subject", r.Subject, "reason", r.Reason, "remove", r.Remove)
	data, err := msgpack.Marshal(r)
	if err != nil {
		return
	}
	id := r.ID()
	if r.Kind == SkipDropped {
		id = ""
	}
	ev := &abi.Event{ID: id, Type: SubjectStoreSkipped, Source: "kernel", Data: data}
	if _, err := b.Publish(ctx, ev); err != nil && ctx.Err() == nil {
		log.Warn("the report of a skipped message could not be stored", "err", err)
	}
}

// SubjectStoreSkipped reports a message of a shared stream that the store
// does not read as events: one that is not Kairo's, one whose headers or
// events lie, or a gap in the seqs. See [StoreSkipped].
const SubjectStoreSkipped = abi.SubjectSystemStoreSkipped

// The kinds of [StoreSkipped].
const (
	SkipStray  = "stray"  // not a message of Kairo's store
	SkipStale  = "stale"  // it claims seqs handed out before it
	SkipForged = "forged" // its events name another host than its subject
	SkipBroken = "broken" // its events cannot be read
	SkipGap    = "gap"    // seqs no message of the stream holds any more
	// SkipDropped counts the reports dropped past [MaxSkipReports].
	SkipDropped = "dropped"
)

// StoreSkipped is the data of [SubjectStoreSkipped]. A shared stream is a
// door: whoever holds credentials for it can write any message to it. The
// store reads a message as events only when its headers place it right
// after the events before it and each of its events names the host its
// subject names; anything else is skipped, with the same verdict on every
// host, and reported once, with the command that removes it.
type StoreSkipped struct {
	Store   string `msgpack:"store"`
	Stream  uint64 `msgpack:"stream,omitempty"`  // the message's stream sequence
	Subject string `msgpack:"subject,omitempty"` // where it was stored
	Kind    string `msgpack:"kind"`
	Reason  string `msgpack:"reason"`
	// From and To are the seqs a gap leaves out (SkipGap).
	From uint64 `msgpack:"from,omitempty"`
	To   uint64 `msgpack:"to,omitempty"`
	// Remove is the command that removes the message from the stream.
	Remove string `msgpack:"remove,omitempty"`
}

// ID is the report's event ID: the same on every host and at every open,
// so that the store keeps one report of a message however often it is
// read.
func (r *StoreSkipped) ID() string {
	if r.Kind == SkipGap {
		return "store-gap-" + utoa(r.From) + "-" + utoa(r.To)
	}
	return "store-skipped-" + utoa(r.Stream)
}

// SkipReporter is a store that skips messages it cannot trust (the
// JetStream store, whose stream others may write to). The bus publishes
// what it skipped as [SubjectStoreSkipped] events.
type SkipReporter interface {
	// OnSkip registers notify, called without the store's locks whenever
	// a report is queued; TakeSkipped returns the queued reports and how
	// many were dropped past the queue's bound since the last call.
	OnSkip(notify func())
	TakeSkipped() ([]StoreSkipped, uint64)
}

// MaxSkipReports bounds the reports a store queues and the messages it
// remembers having reported: past it, a report is dropped and counted.
const MaxSkipReports = 1024
