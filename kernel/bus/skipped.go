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
	r, ok := b.store.(skipReporter)
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

func (b *Bus) reportSkips(r skipReporter) {
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
				Reason: fmt.Sprintf("%d more reports of skipped messages were dropped: at most %d are kept between reports", dropped, maxSkipReports)})
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
