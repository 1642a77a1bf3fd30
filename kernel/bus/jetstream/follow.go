package jetstream

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// jsFollowPoll is how long Follow waits for its consumer before it asks
// the stream whether messages came that the consumer did not deliver.
const jsFollowPoll = time.Second

// jsFollowRetry is how long Follow waits before it watches the stream
// again after losing it (the server restarts, the connection is away).
const jsFollowRetry = time.Second

// Follow watches the stream for the events other writers append (Kairo
// on other hosts of a cluster, on the same stream), adds them to the
// store's indexes — so that LastSeq counts them, Scan reads them and a
// duplicate of one is found without a round trip to the server — and calls
// notify with the new LastSeq. Events another writer appended that an
// Append of this store read first, to place its own, are notified too;
// events this store appends are not.
//
// Follow returns at once. notify runs on a goroutine of Follow's, never
// under the store's locks, one call at a time; appends close together
// may come as one call. The goroutines end when ctx ends or the store is
// closed, and Close waits for them. Without Follow the store still learns
// of other writers' events, later: when an append finds the stream longer
// than it knew.
func (s *Store) Follow(ctx context.Context, notify func(lastSeq uint64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	wake := make(chan struct{}, 1)
	s.followers = append(s.followers, wake)
	from := s.lastStream + 1
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.watch(ctx, from)
	}()
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer stop()
		for {
			select {
			case <-ctx.Done():
				s.mu.Lock()
				for i, w := range s.followers {
					if w == wake {
						s.followers = append(s.followers[:i], s.followers[i+1:]...)
						break
					}
				}
				s.mu.Unlock()
				return
			case <-wake:
				notify(s.LastSeq())
			}
		}
	}()
}

// wakeFollowersLocked tells every Follow that events of other writers were
// indexed.
func (s *Store) wakeFollowersLocked() {
	for _, w := range s.followers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// watch reads the stream from stream sequence from on, as messages arrive,
// and indexes those no append has read yet; it starts again after
// jsFollowRetry when it loses the stream.
func (s *Store) watch(ctx context.Context, from uint64) {
	for {
		s.watchOnce(ctx, &from)
		select {
		case <-ctx.Done():
			return
		case <-time.After(jsFollowRetry):
		}
	}
}

func (s *Store) watchOnce(ctx context.Context, from *uint64) {
	// Headers only: most messages are the store's own, indexed already;
	// another writer's is then read whole.
	cons, err := s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       *from,
		HeadersOnly:       true,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(jsPullMessages, max(jsPullBytes, 2*s.maxData)))
	if err != nil {
		return
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		nctx, cancel := context.WithTimeout(ctx, jsFollowPoll)
		msg, err := it.Next(jetstream.NextContext(nctx))
		quiet := err != nil && nctx.Err() != nil && ctx.Err() == nil
		cancel()
		if quiet {
			// Nothing came for a while. An ordered consumer on a
			// cluster can stall after a leader change, saying nothing:
			// ask the stream itself, and read what the consumer missed.
			if s.pollLocked(ctx, from) {
				return // a new consumer, from past what was read
			}
			continue
		}
		if err != nil {
			return
		}
		meta, err := msg.Metadata()
		if err != nil {
			return
		}
		seq := meta.Sequence.Stream
		*from = seq + 1
		if msg.Subject() == s.subject {
			continue // this store's own: its append placed it
		}
		// Read outside the lock, which an append holds through its
		// round trips: the append then finds the message read.
		m := s.fetch(ctx, seq)
		s.mu.Lock()
		switch {
		case s.closed || seq <= s.lastStream:
		case m != nil && seq == s.lastStream+1:
			if s.takeLocked(m) {
				s.wakeFollowersLocked()
			}
			s.lastStream = seq
		default:
			s.followLocked(ctx, seq)
		}
		s.mu.Unlock()
	}
}

// fetch reads the message at stream sequence seq, nil if it cannot.
func (s *Store) fetch(ctx context.Context, seq uint64) *jsMessage {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	raw, err := s.stream.GetMsg(ctx, seq)
	if err != nil {
		return nil
	}
	return readMessage(seq, raw.Subject, raw.Header, raw.Data)
}

// pollLocked reads the messages the stream holds past what the store has
// read, if there are any, and moves *from past them. It takes s.mu.
func (s *Store) pollLocked(ctx context.Context, from *uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	info, err := s.stream.Info(ctx)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || info.State.LastSeq <= s.lastStream {
		return false
	}
	if err := s.catchUpLocked(ctx, info.State.LastSeq); err != nil {
		return false
	}
	*from = s.lastStream + 1
	return true
}

// followLocked reads the messages up to stream sequence seq, another
// writer's (or one of this store's whose acknowledgement was lost), and
// indexes those that can be trusted (takeLocked). It reads from where the
// store was, not the one message: a message before seq that a failed read
// left unread would otherwise look like a gap, and its events be lost to
// this host. What it cannot read is left to the next append or poll, which
// read the stream from where the store was.
func (s *Store) followLocked(ctx context.Context, seq uint64) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	s.catchUpLocked(ctx, seq)
}
