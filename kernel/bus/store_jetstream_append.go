package bus

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// appendWindow is how many publishes of one append are in flight before
// the oldest acknowledgement is waited for.
const appendWindow = 4096

// JetStream error codes the store acts on.
const (
	jsWrongLastSeq     = 10071 // "wrong last sequence: {seq}"
	jsStoreFailed      = 10077 // "maximum bytes exceeded", among others
	jsResourceExceeded = 10047 // the server's or account's storage is used up
)

// StreamFullError is what an append gets when the stream is at its
// MaxBytes (or the server's storage limit). The bus treats it as a full
// disk (IsDiskFull): it refuses events, keeps serving reads and
// subscriptions, and resumes by itself once the stream takes events again.
type StreamFullError struct {
	Stream   string
	MaxBytes int64 // 0: the server's or account's limit, not the stream's
	Err      error
}

// Error names the limit and what to do about it.
func (e *StreamFullError) Error() string {
	if e.MaxBytes > 0 {
		return fmt.Sprintf("jetstream stream %s is full: it holds its max_bytes of %d bytes and refuses new events rather than drop old ones; raise [store.jetstream] max_bytes, set max_age, or purge old events: %v", e.Stream, e.MaxBytes, e.Err)
	}
	return fmt.Sprintf("jetstream stream %s is full: the server's storage for JetStream is used up; give the server more storage (max_file_store) or free some: %v", e.Stream, e.Err)
}

// Unwrap is the server's error.
func (e *StreamFullError) Unwrap() error { return e.Err }

// Is makes a full stream a full disk to IsDiskFull, so the bus degrades
// the same way for both.
func (e *StreamFullError) Is(target error) bool { return target == syscall.ENOSPC }

// jetStreamIDToken encodes an event ID as one subject token. IDs made of
// letters, digits, '-' and '_' (every canonical UUID) are their own token;
// any other ID is '~' and its unpadded base64url, which never collides with
// the first kind since '~' is not among them.
func jetStreamIDToken(id string) string {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "~" + base64.RawURLEncoding.EncodeToString([]byte(id))
		}
	}
	return id
}

// subject is where ev is stored: PREFIX.ID.TYPE. The ID comes before the
// type so that "PREFIX.ID.>" names every event of that ID whatever its type,
// which the server checks for deduplication.
func (s *JetStreamStore) subject(idTok, typ string) string {
	return s.opts.Prefix + "." + idTok + "." + typ
}

// Append publishes evs in order, all in flight together, and waits for
// every acknowledgement. Each message carries the expectation that no
// message is stored under PREFIX.ID.> yet, which the server checks
// atomically with the write: a duplicate ID, also one stored long ago or by
// another host, is refused with the sequence of the stored one, and costs
// no second round trip. The deduplication lasts as long as the event does
// (MaxAge), not a duplicate window.
//
// On an error that is not a duplicate, the events of evs that the server
// did store are deleted again before Append returns the error, so nothing
// of evs is stored; if the deletion fails too (the connection is gone),
// those events stay, a publisher's retry with the same IDs finds them as
// duplicates, and the error says so.
func (s *JetStreamStore) Append(evs []*abi.Event, envs [][]byte, dup []bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	futs := make([]jetstream.PubAckFuture, len(evs))
	stored := make([]uint64, 0, len(evs))
	var firstErr error
	waited := 0
	wait := func() {
		i := waited
		waited++
		ev := evs[i]
		ev.Seq, dup[i] = 0, false
		if futs[i] == nil {
			return
		}
		var err error
		select {
		case ack := <-futs[i].Ok():
			ev.Seq = ack.Sequence
			if ack.Duplicate {
				dup[i] = true // a Nats-Msg-Id someone else set; not ours
			} else {
				stored = append(stored, ack.Sequence)
			}
			return
		case err = <-futs[i].Err():
		}
		if seq, ok := s.duplicateOf(err, futs[i].Msg()); ok {
			ev.Seq, dup[i] = seq, true
			return
		}
		if firstErr == nil {
			firstErr = s.appendError(ev, err)
		}
	}
	for i, ev := range evs {
		if firstErr != nil {
			break
		}
		var env []byte
		if envs != nil {
			env = envs[i]
		} else {
			env, _ = s.EncodeEnv(ev)
		}
		tok := jetStreamIDToken(ev.ID)
		m := &nats.Msg{
			Subject: s.subject(tok, ev.Type),
			Data:    env,
			Header: nats.Header{
				jetstream.ExpectedLastSubjSeqHeader:     []string{"0"},
				jetstream.ExpectedLastSubjSeqSubjHeader: []string{s.opts.Prefix + "." + tok + ".>"},
			},
		}
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			firstErr = s.appendError(ev, err)
			break
		}
		futs[i] = f
		if i-waited >= appendWindow {
			wait()
		}
	}
	for waited < len(evs) {
		wait()
	}
	if firstErr == nil {
		for i := 1; i < len(stored); i++ {
			if stored[i] <= stored[i-1] {
				firstErr = fmt.Errorf("%s: the stream stored the events of one append out of order (seq %d after %d): is another writer publishing on %s.> without the store?", s.describe, stored[i], stored[i-1], s.opts.Prefix)
				break
			}
		}
	}
	if firstErr != nil {
		for _, ev := range evs {
			ev.Seq = 0
		}
		return s.rollback(stored, firstErr)
	}
	if n := len(stored); n > 0 && stored[n-1] > s.last.Load() {
		s.last.Store(stored[n-1])
	}
	return nil
}

// duplicateOf reports whether err is the server refusing m because an event
// of its ID is stored, and that event's sequence number.
func (s *JetStreamStore) duplicateOf(err error, m *nats.Msg) (uint64, bool) {
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != jsWrongLastSeq {
		return 0, false
	}
	// "wrong last sequence: 42": the server names the stored event.
	if i := strings.LastIndexByte(api.Description, ':'); i >= 0 {
		if seq, err := strconv.ParseUint(strings.TrimSpace(api.Description[i+1:]), 10, 64); err == nil && seq > 0 {
			return seq, true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	raw, gerr := s.stream.GetLastMsgForSubject(ctx, m.Header.Get(jetstream.ExpectedLastSubjSeqSubjHeader))
	if gerr != nil {
		return 0, false
	}
	return raw.Sequence, true
}

// appendError turns the server's refusal into the store's error.
func (s *JetStreamStore) appendError(ev *abi.Event, err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch {
		case api.ErrorCode == jsStoreFailed && strings.Contains(api.Description, "maximum bytes"):
			return &StreamFullError{Stream: s.opts.Stream, MaxBytes: s.opts.MaxBytes, Err: err}
		case api.ErrorCode == jsResourceExceeded:
			return &StreamFullError{Stream: s.opts.Stream, Err: err}
		}
	}
	return fmt.Errorf("%s: publish event %s (%s): %w", s.describe, ev.ID, ev.Type, err)
}

// rollback deletes the events of a failed append that the server stored.
func (s *JetStreamStore) rollback(stored []uint64, err error) error {
	if len(stored) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	var left []uint64
	for _, seq := range stored {
		if derr := s.stream.DeleteMsg(ctx, seq); derr != nil {
			left = append(left, seq)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("%w (and %d events of the same append, seq %d..%d, stay stored: the deletion that undoes them failed; publishing them again finds them as duplicates)", err, len(left), left[0], left[len(left)-1])
	}
	return err
}
