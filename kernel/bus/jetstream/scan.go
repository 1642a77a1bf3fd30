package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// A read of this many messages or fewer asks for each by itself; a longer
// one goes through an ordered consumer, which streams them.
const jsGetReads = 4

// jsPullMessages bounds the messages a consumer buffers; jsPullBytes, at
// least twice the largest message, the bytes of one pull.
const (
	jsPullMessages = 1024
	jsPullBytes    = 16 << 20
)

// Scan reads the messages that may hold matching events, from the one
// holding q.FromSeq (or the first that may hold an event at q.Since or
// later) to the one holding the last event stored when it began (or
// q.ToSeq), and filters their events: time and subject are the events'
// own, which the stream does not index.
func (s *Store) Scan(ctx context.Context, q bus.Query, fn func(*abi.Event) error) error {
	lo, hi := max(q.FromSeq, 1), s.last.Load()
	if q.ToSeq > 0 && q.ToSeq < hi {
		hi = q.ToSeq
	}
	if lo > hi {
		return nil
	}
	s.imu.RLock()
	if len(s.seqs) == 0 {
		s.imu.RUnlock()
		return nil
	}
	i, j := s.seqs.at(lo), s.seqs.at(hi)
	if !q.Since.IsZero() {
		i = max(i, s.seqs.since(q.Since.UnixNano()))
	}
	var from, to uint64
	if i <= j {
		from, to = s.seqs[i].stream, s.seqs[j].stream
	}
	s.imu.RUnlock()
	if i > j {
		return nil
	}
	out := bus.NewHandout(q, fn)
	var evs []abi.Event
	var handErr error // fn's, or ErrStop
	k := i            // the index entry of the message read next
	err := s.read(ctx, from, to, j-i+1, func(m *jsMessage) error {
		if !s.indexed(&k, m.stream) {
			return nil // skipped when the store read it (takeLocked)
		}
		if m.first > hi {
			return errEndRead
		}
		evs = evs[:0]
		host, _ := s.writerHost(m.subject)
		var decodeErr error
		// Every event of the message is decoded, also those outside the
		// query, so that whether it is read does not depend on the query.
		var other abi.Event
		err := m.envs(func(seq uint64, env []byte) bool {
			ev := &other
			keep := seq >= lo && seq <= hi
			if keep {
				evs = append(evs, abi.Event{})
				ev = &evs[len(evs)-1]
			}
			if _, decodeErr = abi.DecodeEvent(env, ev); decodeErr != nil {
				return false
			}
			if ev.Host != host {
				decodeErr = forgedError(m, ev, host)
				return false
			}
			if !keep {
				return true
			}
			ev.Seq = seq
			if !q.MatchMeta(ev) {
				evs = evs[:len(evs)-1]
				return true
			}
			// A copy: the event may outlive the message, which is large.
			ev.Data = append([]byte(nil), ev.Data...)
			return true
		})
		if err == nil {
			err = decodeErr
		}
		if err != nil {
			// Indexed, so its seqs are taken, but its events are not
			// read: every host skips them alike.
			kind := bus.SkipBroken
			if errors.Is(err, errForged) {
				kind = bus.SkipForged
			}
			s.skip(m, kind, err)
			return nil
		}
		if handErr = out.Hand(evs); handErr != nil {
			return errEndRead
		}
		return nil
	})
	switch {
	case err == errEndRead && (handErr == nil || handErr == bus.ErrStop):
		return nil
	case err == errEndRead:
		return handErr
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("scan %s: %w", s.describe, err)
	}
	return nil
}

// indexed reports whether the message at stream sequence stream is one
// the seq index holds, moving *k, the position of the entry a Scan expects
// next, past the entries before it.
func (s *Store) indexed(k *int, stream uint64) bool {
	s.imu.RLock()
	defer s.imu.RUnlock()
	for *k < len(s.seqs) && s.seqs[*k].stream < stream {
		*k++
	}
	return *k < len(s.seqs) && s.seqs[*k].stream == stream
}

// errEndRead, returned by a read's callback, ends the read early.
var errEndRead = errors.New("end of read")

// readMessage is the message read at stream sequence seq: parsed, or with
// bad set when it is not Kairo's.
func readMessage(seq uint64, subject string, hdr nats.Header, data []byte) *jsMessage {
	m, err := parseMessage(seq, subject, hdr, data)
	if err != nil {
		return &jsMessage{stream: seq, subject: subject, bad: err}
	}
	return m
}

// read calls fn with each message of the stream from stream sequence from
// to to, in order, until fn returns an error; n is how many the caller
// expects there are.
func (s *Store) read(ctx context.Context, from, to uint64, n int, fn func(*jsMessage) error) error {
	if n <= jsGetReads {
		return s.readByGet(ctx, from, to, fn)
	}
	return s.readByConsumer(ctx, from, to, fn)
}

// readByGet asks for each message, the next one stored from a sequence on.
func (s *Store) readByGet(ctx context.Context, from, to uint64, fn func(*jsMessage) error) error {
	timeouts := 0
	for seq := from; seq <= to; {
		raw, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if transientRead(err) && timeouts < jsReadTries {
				timeouts++
				continue
			}
			return err
		}
		if raw.Sequence > to {
			return nil
		}
		if err := fn(readMessage(raw.Sequence, raw.Subject, raw.Header, raw.Data)); err != nil {
			return err
		}
		seq = raw.Sequence + 1
	}
	return nil
}

// readByConsumer streams the messages through an ordered consumer. A
// consumer that stalls — seen on a cluster under load: it says messages
// are pending and sends none — is made again from where it was, and after
// jsStalls of them the rest is read by get.
func (s *Store) readByConsumer(ctx context.Context, from, to uint64, fn func(*jsMessage) error) error {
	stalls, timeouts := 0, 0
	for {
		next, err := s.consume(ctx, from, to, fn)
		switch {
		case err == errShort, err == errStalled && stalls == jsStalls:
			return s.readByGet(ctx, next, to, fn)
		case err == errStalled:
			stalls++
		case err != nil && ctx.Err() == nil && transientRead(err) && timeouts < jsReadTries:
			timeouts++
		default:
			return err
		}
		from = next
	}
}

// jsReadTries is how many times a read asks again, from where it was,
// after the server did not answer in time: while a cluster elects a new
// leader, a request can go unanswered once or twice, and a read is safe
// to repeat.
const jsReadTries = 3

// transientRead reports whether err is the server not answering in time.
func transientRead(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// jsStalls is how many stalled consumers a read makes again; jsStall is
// how long a consumer may send nothing while messages are pending.
const (
	jsStalls = 2
	jsStall  = 2 * time.Second
)

var (
	errStalled = errors.New("the consumer sent nothing while messages were pending")
	// errShort: the consumer has nothing more before the read's end. Its
	// replica of the stream may lag the leader's (or the last messages
	// were deleted): a get, which the leader answers, reads the rest.
	errShort = errors.New("the consumer ended before the read")
)

// consume reads from stream sequence from to to through one ordered
// consumer; when it stalls it returns errStalled and the sequence to read
// from next.
func (s *Store) consume(ctx context.Context, from, to uint64, fn func(*jsMessage) error) (uint64, error) {
	cons, err := s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return from, err
	}
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		return from, errShort
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(jsPullMessages, max(jsPullBytes, 2*s.maxData)))
	if err != nil {
		return from, err
	}
	defer it.Stop()
	for {
		nctx, cancel := context.WithTimeout(ctx, min(jsStall, s.opts.Timeout))
		msg, err := it.Next(jetstream.NextContext(nctx))
		stalled := err != nil && nctx.Err() != nil
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return from, ctx.Err()
		case stalled:
			return from, errStalled
		case err != nil:
			return from, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return from, err
		}
		seq := meta.Sequence.Stream
		if seq > to {
			return from, nil
		}
		if err := fn(readMessage(seq, msg.Subject(), msg.Headers(), msg.Data())); err != nil {
			return from, err
		}
		from = seq + 1
		switch {
		case seq == to:
			return from, nil
		case meta.NumPending == 0:
			return from, errShort
		}
	}
}
