package kernel

import (
	"context"
	"log/slog"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// The kernel's facts — a process spawned, exited, canceled, its progress,
// what its sandbox refused — are published with bus.PublishKept
// (kernel/proc): when the store is away or full the bus keeps them,
// bounded by bus.MaxKept, and stores them in order once it is back. What
// that bound dropped the bus reports then as bus.SubjectStoreDropped,
// which watchDropped puts in the log as well: an operator reading
// kairo.log learns that some exits were never recorded.

// watchDropped logs every bus.SubjectStoreDropped until the kernel closes.
func (k *Kernel) watchDropped() {
	log := k.opts.Logger
	if log == nil {
		return
	}
	sub, err := k.Bus.Subscribe(context.Background(), bus.SubjectStoreDropped, bus.SubscribeConfig{}, func(evs []abi.Event) error {
		for _, ev := range evs {
			var d bus.StoreDropped
			if msgpack.Unmarshal(ev.Data, &d) != nil {
				continue
			}
			log.Warn("the event store was away and the kernel's facts overflowed what the bus keeps: some were never stored (kairo.system.store.dropped)",
				slog.Uint64("dropped", d.Dropped), slog.Int("kept", d.Kept), slog.Time("since", d.Since), slog.String("store", d.Store))
		}
		return nil
	})
	if err == nil {
		k.dropWatch = sub
	}
}
