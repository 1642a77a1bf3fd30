package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// scanPull is how many messages a replay asks the server for at a time.
const scanPull = 4096

// filters are the stream subject filters for a Kairo pattern: the pattern
// after PREFIX and the ID token. The server filters, so a remote replay
// sends only the matching events; the bus's own matching still decides.
// Every subject of the stream matches "every subject", which needs no
// filter: the server then skips matching each message.
func (s *JetStreamStore) filters(p *Pattern) []string {
	if p == nil || p.all {
		return nil
	}
	return []string{s.opts.Prefix + ".*." + p.String()}
}

// Scan reads the matching events in sequence order through an ordered
// consumer starting at q.FromSeq, and stops at the last sequence stored
// when it began (or q.ToSeq). Time bounds are the events' own times, which
// the stream does not index: a replay by time reads its whole sequence
// range and filters, as the SQLite store does past its last span.
func (s *JetStreamStore) Scan(ctx context.Context, q Query, fn func(*abi.Event) error) error {
	lo, hi := max(q.FromSeq, 1), s.last.Load()
	if q.ToSeq > 0 && q.ToSeq < hi {
		hi = q.ToSeq
	}
	if lo > hi {
		return nil
	}
	cons, err := s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    s.filters(q.Pattern),
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       lo,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("scan %s: %w", s.describe, err)
	}
	// No more than the range holds (or the limit asks for): a short scan,
	// a subscriber catching up, does not have the server send 4096.
	pull := min(hi-lo+1, scanPull)
	if q.Limit > 0 {
		pull = min(pull, uint64(q.Limit))
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(int(pull)))
	if err != nil {
		return fmt.Errorf("scan %s: %w", s.describe, err)
	}
	defer it.Stop()
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		return nil
	}
	out := handOut{fn: fn, limit: q.Limit}
	evs := make([]abi.Event, 1)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("scan %s: %w", s.describe, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("scan %s: %w", s.describe, err)
		}
		seq := meta.Sequence.Stream
		if seq > hi {
			return nil
		}
		ev := &evs[0]
		if _, err := abi.DecodeEvent(msg.Data(), ev); err != nil {
			return fmt.Errorf("scan %s: message seq %d (%s): %w", s.describe, seq, msg.Subject(), err)
		}
		ev.Seq = seq
		if q.matchMeta(ev) {
			if err := out.hand(evs); err != nil {
				if err == ErrStop {
					return nil
				}
				return err
			}
		}
		if seq == hi || meta.NumPending == 0 {
			return nil
		}
	}
}
