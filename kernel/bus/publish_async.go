package bus

import (
	"time"

	"github.com/kairo-os/kairo/abi"
)

// PublishAsyncBatch queues evs for the store in order and returns at once,
// with one [Ack] per event. On a group-commit store they are queued under
// one lock, so the committer takes them together: one commit, where
// events queued one by one could be split across two or three by a
// committer that woke between them. Without group commit they are
// appended at once, as [Bus.PublishBatch] appends them.
//
// Every event is checked before any is queued; on error none is. The
// caller must not modify an event until its Ack is done.
func (b *Bus) PublishAsyncBatch(evs []*abi.Event) ([]*Ack, error) {
	acks := make([]*Ack, len(evs))
	if len(evs) == 0 {
		return acks, nil
	}
	now := clockNow()
	for _, ev := range evs {
		if err := b.prepareAt(ev, now); err != nil {
			return nil, err
		}
	}
	return b.queueBatch(evs, now)
}

// queueBatch is PublishAsyncBatch after the events were prepared at now.
func (b *Bus) queueBatch(evs []*abi.Event, now time.Time) ([]*Ack, error) {
	acks := make([]*Ack, len(evs))
	if b.kick == nil {
		dup := make([]bool, len(evs))
		b.mu.Lock()
		err := b.appendLocked(evs, nil, dup, now)
		b.mu.Unlock()
		for i, ev := range evs {
			acks[i] = &Ack{res: Result{Seq: ev.Seq, Duplicate: dup[i]}, err: err}
		}
		return acks, nil
	}
	var envs [][]byte
	if enc, ok := b.store.(EnvEncoder); ok {
		envs = make([][]byte, len(evs))
		for i, ev := range evs {
			var err error
			if envs[i], err = enc.EncodeEnv(ev); err != nil {
				return nil, err
			}
		}
	}
	b.qmu.Lock()
	// As enqueue: wait while the queue is full, then queue the whole
	// batch, which may pass MaxPending by len(evs) - 1.
	bt, fresh, err := b.batchLocked()
	if err != nil {
		b.qmu.Unlock()
		return nil, err
	}
	for i, ev := range evs {
		acks[i] = &Ack{b: bt, i: len(bt.evs)}
		bt.evs = append(bt.evs, ev)
		if envs != nil {
			bt.envs = append(bt.envs, envs[i])
		}
		bt.dup = append(bt.dup, false)
		if bt.keep != nil {
			bt.keep = append(bt.keep, false)
		}
	}
	b.pending += len(evs)
	b.qmu.Unlock()
	b.kickFresh(fresh)
	return acks, nil
}
