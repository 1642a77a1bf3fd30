package jetstream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// JetStream error codes the store acts on.
const (
	jsWrongLastSeq     = 10071 // "wrong last sequence: {seq}"
	jsStoreFailed      = 10077 // "maximum bytes exceeded", among others
	jsResourceExceeded = 10047 // the server's or account's storage is used up
)

// jsRaceTries is how many times an append tries again when other writers
// keep appending before it.
const jsRaceTries = 100

// StreamFullError is what an append gets when the stream is at its
// MaxBytes (or the server's storage limit). The bus treats it as a full
// disk (IsDiskFull): it refuses events, keeps serving reads and
// subscriptions, and resumes by itself once the stream takes events again.
type StreamFullError struct {
	Stream   string
	MaxBytes int64 // 0: the server's or account's limit, not the stream's; -1: the stream's, of a size unknown
	Err      error
}

// Error names the limit and what to do about it.
func (e *StreamFullError) Error() string {
	if e.MaxBytes != 0 {
		limit := "its max_bytes"
		if e.MaxBytes > 0 {
			limit += " of " + strconv.FormatUint(uint64(e.MaxBytes), 10) + " bytes"
		}
		return fmt.Sprintf("jetstream stream %s is full: it holds %s and refuses new events rather than drop old ones; raise [store.jetstream] max_bytes and run kairo store apply (or nats stream edit %s --max-bytes), or set max_age: %v", e.Stream, limit, e.Stream, e.Err)
	}
	return fmt.Sprintf("jetstream stream %s is full: the server's storage for JetStream is used up; give the server more storage (max_file_store) or free some: %v", e.Stream, e.Err)
}

// Unwrap is the server's error.
func (e *StreamFullError) Unwrap() error { return e.Err }

// Is makes a full stream a full disk to IsDiskFull, so the bus degrades
// the same way for both.
func (e *StreamFullError) Is(target error) bool { return target == syscall.ENOSPC }

// appendEvents publishes the new events of evs in one message (more only when
// they pass the server's maximum payload) and waits for its
// acknowledgement. A duplicate is found in the id index, confirmed by
// reading the stored event's ID, and not published.
//
// The message expects the stream's last sequence to be the one the store
// knows, which the server checks atomically with the write. When another
// writer appended first, the store reads what it appended (indexing its
// events: some of evs may now be duplicates) and tries again. A publish
// the server does not answer within the Timeout fails the append; should
// its message land later, the store deletes it when it reads it (its next
// append finds the stream longer than it knew, or Follow shows it).
//
// On an error, the messages of evs that the server stored are deleted
// again before Append returns it, so nothing of evs is stored; if the
// deletion fails too (the connection is gone), those events stay, a
// publisher's retry with the same IDs finds them as duplicates, and the
// error says so.
func (s *Store) appendEvents(evs []*abi.Event, envs [][]byte, dup []bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return bus.ErrClosed
	}
	if envs == nil {
		envs = make([][]byte, len(evs))
		for i, ev := range evs {
			envs[i], _ = s.EncodeEnv(ev)
		}
	}
	for i, ev := range evs {
		ev.Seq, dup[i] = 0, false
		if ev.Host != s.opts.Host {
			// Every reader would skip it as forged (its subject is this
			// host's): the bus's Config.Host and the store's Host differ.
			return fmt.Errorf("%s: event %s (%s) names host %q, and this store writes for host %q: give the bus and the store the same host", s.describe, ev.ID, ev.Type, ev.Host, s.opts.Host)
		}
		if n := 1 + frameRoom(len(envs[i])); n > s.maxData {
			return fmt.Errorf("%s: event %s (%s) takes %d bytes stored, more than a message of the server holds (max_payload %d, less %d for headers); raise the server's max_payload or publish less data", s.describe, ev.ID, ev.Type, n, s.nc.MaxPayload(), jsHeaderRoom)
		}
	}
	s.fetched = nil // kept within one append only: its writer may delete it
	a := appendRun{s: s, evs: evs, envs: envs, dup: dup, buf: s.scratch.buf, undo: s.scratch.undo[:0]}
	defer func() {
		s.scratch.buf, s.scratch.undo = a.buf, a.undo
	}()
	if err := a.run(); err != nil {
		for i, ev := range evs {
			ev.Seq, dup[i] = 0, false
		}
		return a.rollback(err)
	}
	return nil
}

// appendRun is one Append under way.
type appendRun struct {
	s    *Store
	evs  []*abi.Event
	envs [][]byte
	dup  []bool
	done int // evs[:done] are stored or found duplicates

	cur    []*abi.Event // the events of the message being framed
	buf    []byte
	undo   []idUndo // what this append added to the id index
	stored []storedMessage
	races  int
}

// storedMessage is a message of this append the server stored, and its
// part of undo.
type storedMessage struct {
	stream     uint64
	undoFrom   int
	undoTo     int
	first, end uint64 // its events' seqs, end exclusive
}

func (a *appendRun) run() error {
	for a.done < len(a.evs) {
		m, n, err := a.frame()
		if err != nil {
			return err
		}
		if m == nil { // duplicates only
			a.done += n
			continue
		}
		ok, err := a.publish(m)
		if err != nil {
			return err
		}
		if ok {
			a.done += n
		}
	}
	return nil
}

// frame builds the next message from evs[done:]: the new events that fit,
// each given the next seq, and the duplicates among and after them marked
// as such. It returns nil when evs[done:done+n] are all duplicates.
func (a *appendRun) frame() (*jsMessage, int, error) {
	s := a.s
	m := &jsMessage{first: s.last.Load() + 1, maxTime: math.MinInt64}
	a.buf = append(a.buf[:0], jsFormat)
	a.cur = a.cur[:0]
	i := a.done
	for ; i < len(a.evs); i++ {
		ev := a.evs[i]
		key := idKey(s.opts.Host, ev.ID)
		h := s.ids.sum(key)
		seq, err := a.lookup(key, ev.ID, h)
		if err != nil {
			return nil, 0, err
		}
		if seq != 0 {
			ev.Seq, a.dup[i] = seq, true
			continue
		}
		if m.count > 0 && len(a.buf)+frameRoom(len(a.envs[i])) > s.maxData {
			break
		}
		a.buf = appendFrame(a.buf, a.envs[i])
		ev.Seq, a.dup[i] = m.first+uint64(m.count), false
		m.count++
		m.maxTime = max(m.maxTime, ev.Time.UnixNano())
		a.cur = append(a.cur, ev)
		// In the index before it is stored, so that a later event of evs
		// with the same ID is its duplicate; taken out if it is not stored.
		a.undo = append(a.undo, s.ids.add(key, h, ev.Seq))
	}
	if m.count == 0 {
		return nil, i - a.done, nil
	}
	m.data = a.buf
	return m, i - a.done, nil
}

// lookup returns the seq of this host's stored event of id, whose key in
// the id index is key (idKey), 0 if none.
func (a *appendRun) lookup(key, id string, h uint64) (uint64, error) {
	exact, bySum := a.s.ids.candidates(key, h)
	for _, seq := range [2]uint64{exact, bySum} {
		if seq == 0 {
			continue
		}
		got, err := a.idAt(seq)
		if err != nil {
			return 0, err
		}
		if got == id {
			return seq, nil
		}
	}
	return 0, nil
}

// idAt is the ID of the event at seq: one of the message being framed, or
// one read back from the stream; "" when none is (it expired, or its
// append was undone).
func (a *appendRun) idAt(seq uint64) (string, error) {
	if first := a.s.last.Load() + 1; seq >= first {
		if k := seq - first; k < uint64(len(a.cur)) {
			return a.cur[k].ID, nil
		}
		return "", nil
	}
	return a.s.storedIDLocked(seq)
}

// publish publishes m and reports whether it is stored; false means
// another writer appended first, and evs[done:] must be framed again.
// One try waits for the server at most the store's Timeout.
func (a *appendRun) publish(m *jsMessage) (bool, error) {
	s := a.s
	s.sent++
	m.msgID = s.writer + "." + strconv.FormatUint(s.sent, 10)
	undoFrom := len(a.undo) - m.count
	ack, err := s.publishOnce(m)
	if err == nil {
		m.stream = ack.Sequence
		s.placeLocked(m)
		a.stored = append(a.stored, storedMessage{m.stream, undoFrom, len(a.undo), m.first, m.first + uint64(m.count)})
		return true, nil
	}
	// Unanswered, the message may still land: the store then reads it as
	// it reads another writer's, and its events are stored, which a retry
	// with the same IDs finds.
	lseq, raced := wrongLastSeq(err)
	if !raced {
		return false, s.appendError(a.cur[0], err)
	}
	if a.races++; a.races > jsRaceTries {
		return false, fmt.Errorf("%s: other writers appended before each of %d tries; giving up: %w", s.describe, jsRaceTries, err)
	}
	for i := len(a.undo) - 1; i >= undoFrom; i-- {
		s.ids.undo(a.undo[i])
	}
	a.undo = a.undo[:undoFrom]
	if err := s.catchUpLocked(context.Background(), lseq); err != nil {
		return false, fmt.Errorf("%s: read what other writers appended: %w", s.describe, err)
	}
	return false, nil
}

func (s *Store) publishOnce(m *jsMessage) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	return s.js.PublishMsg(ctx, &nats.Msg{Subject: s.subject, Header: m.header(s.lastStream), Data: m.data})
}

// wrongLastSeq reports whether err is the server refusing a message because
// the stream's last sequence is another than expected, and that sequence
// (0 if the error does not say).
func wrongLastSeq(err error) (uint64, bool) {
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != jsWrongLastSeq {
		return 0, false
	}
	if i := strings.LastIndexByte(api.Description, ':'); i >= 0 {
		if seq, err := strconv.ParseUint(strings.TrimSpace(api.Description[i+1:]), 10, 64); err == nil {
			return seq, true
		}
	}
	return 0, true
}

// appendError turns the server's refusal into the store's error.
func (s *Store) appendError(ev *abi.Event, err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch {
		case api.ErrorCode == jsStoreFailed && strings.Contains(api.Description, "maximum bytes"):
			limit := s.opts.MaxBytes
			if info := s.stream.CachedInfo(); limit == 0 && info != nil {
				limit = info.Config.MaxBytes // the stream's own, set by the operator
			}
			if limit <= 0 {
				limit = -1 // set on the stream after the store opened
			}
			return &StreamFullError{Stream: s.opts.Stream, MaxBytes: limit, Err: err}
		case api.ErrorCode == jsResourceExceeded:
			return &StreamFullError{Stream: s.opts.Stream, Err: err}
		}
	}
	return fmt.Errorf("%s: publish events from %s (%s): %w", s.describe, ev.ID, ev.Type, err)
}

// rollback takes the events of a failed append out of the id index, but
// for those of the messages the server stored: a message is never deleted
// (a host that read it may have handed out the seqs after it), so those
// events stay stored, and a publisher's retry with the same IDs finds them
// as duplicates.
func (a *appendRun) rollback(err error) error {
	s := a.s
	kept := 0
	if n := len(a.stored); n > 0 {
		kept = a.stored[n-1].undoTo
	}
	for i := len(a.undo) - 1; i >= kept; i-- {
		s.ids.undo(a.undo[i])
	}
	if kept > 0 {
		return fmt.Errorf("%w (events of the same append, seq %d..%d, are stored: publishing them again finds them as duplicates)", err, a.stored[0].first, a.stored[len(a.stored)-1].end-1)
	}
	return err
}

// placeLocked adds a stored message to the seq index.
func (s *Store) placeLocked(m *jsMessage) {
	s.imu.Lock()
	n := len(s.seqs)
	since := m.maxTime
	if n > 0 {
		since = max(since, s.seqs[n-1].since)
	}
	s.seqs = append(s.seqs, seqEntry{first: m.first, stream: m.stream, since: since})
	s.last.Store(m.last())
	s.imu.Unlock()
	s.lastStream = max(s.lastStream, m.stream)
}

// storedIDLocked reads back the ID of the stored event at seq, "" if no
// event is stored there. The last message read is kept for the rest of
// the append: a batch published again is many duplicates in one message.
func (s *Store) storedIDLocked(seq uint64) (string, error) {
	i := s.seqs.at(seq)
	if i >= len(s.seqs) || s.seqs[i].first > seq {
		return "", nil
	}
	stream := s.seqs[i].stream
	m := s.fetched
	if m == nil || m.stream != stream {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		raw, err := s.stream.GetMsg(ctx, stream)
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: read message %d to confirm a duplicate: %w", s.describe, stream, err)
		}
		if m, err = parseMessage(raw.Sequence, raw.Subject, raw.Header, raw.Data); err != nil {
			return "", nil // skipped when it was read: it holds no event
		}
		s.fetched = m
	}
	if host, _ := s.writerHost(m.subject); host != s.opts.Host {
		// Another host's event: IDs are each host's own, so that no
		// writer can take an ID another will publish.
		return "", nil
	}
	var id []byte
	var idErr error
	err := m.envs(func(at uint64, env []byte) bool {
		if at < seq {
			return true
		}
		var ev abi.Event
		if _, idErr = abi.DecodeEvent(env, &ev); idErr == nil && ev.Host == s.opts.Host {
			id = []byte(ev.ID)
		}
		return false
	})
	if err == nil {
		err = idErr
	}
	if err != nil {
		return "", fmt.Errorf("%s: message %d: %w", s.describe, stream, err)
	}
	return string(id), nil
}

// catchUpLocked indexes the messages stored after lastStream, up to the
// stream's last sequence lseq (0: as far as the stream goes).
//
// On a cluster the server checks an expected last sequence against the
// messages its leader has accepted, some of which it may not have applied
// yet: "wrong last sequence: N" can name a message no read returns for a
// while. So the store reads until it has read message N, waiting for the
// stream to apply it (what the stream's info says), and only then counts N
// as read: counting it unread handed out its events' seqs a second time.
func (s *Store) catchUpLocked(ctx context.Context, lseq uint64) error {
	if lseq == 0 {
		info, err := s.stream.Info(ctx)
		if err != nil {
			return err
		}
		lseq = info.State.LastSeq
	}
	foreign := false
	read := func(from uint64) (uint64, error) {
		got := from - 1
		err := s.read(ctx, from, lseq, int(min(lseq-got, math.MaxInt32)), func(m *jsMessage) error {
			got = m.stream
			if m.stream <= s.lastStream {
				return nil
			}
			if s.takeLocked(m) {
				foreign = true
			}
			s.lastStream = m.stream
			return nil
		})
		return got, err
	}
	if lseq > s.lastStream {
		got, err := read(s.lastStream + 1)
		if err != nil {
			return err
		}
		if got < lseq {
			// The read ended before N: wait until the stream has applied
			// it, then read what it had not. What is still missing must
			// be deleted — the stream says so — else it is not counted
			// as read: a message taken for deleted while a server that
			// lagged answered the read would lose its events to this
			// host, and hand out their seqs again.
			if err := s.waitApplied(ctx, lseq); err != nil {
				return err
			}
			deadline := time.Now().Add(s.opts.Timeout)
			for {
				if got, err = read(got + 1); err != nil {
					return err
				}
				if got >= lseq {
					break
				}
				missing, err := s.undeleted(ctx, got+1, lseq)
				if err != nil {
					return err
				}
				if missing == 0 {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("message %d of the stream is neither readable nor deleted after %v: the server that answered lags; try again", missing, s.opts.Timeout)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	// The server expects lseq, also when the last messages were deleted.
	s.lastStream = max(s.lastStream, lseq)
	if foreign {
		s.wakeFollowersLocked()
	}
	return nil
}

// undeleted returns the first message from stream sequence from to to
// that the stream's info does not list as deleted, 0 if every one is.
func (s *Store) undeleted(ctx context.Context, from, to uint64) (uint64, error) {
	info, err := s.stream.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return 0, err
	}
	deleted := make(map[uint64]bool, len(info.State.Deleted))
	for _, seq := range info.State.Deleted {
		deleted[seq] = true
	}
	for seq := max(from, info.State.FirstSeq); seq <= to; seq++ {
		if !deleted[seq] {
			return seq, nil
		}
	}
	return 0, nil
}

// waitApplied waits until the stream's leader has applied every message up
// to stream sequence lseq, at most the store's Timeout.
func (s *Store) waitApplied(ctx context.Context, lseq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	pause := time.Millisecond
	for {
		info, err := s.stream.Info(ctx)
		if err == nil && info.State.LastSeq >= lseq {
			return nil
		}
		if ctx.Err() != nil {
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("the server named message %d as the stream's last, and the stream had not applied it within %v: %w", lseq, s.opts.Timeout, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}
