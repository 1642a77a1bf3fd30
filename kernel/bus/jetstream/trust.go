package jetstream

import (
	"errors"
	"fmt"
	"sync"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// skipLog is a store's reports of what it skipped, not yet published.
type skipLog struct {
	mu      sync.Mutex
	seen    map[string]bool // report IDs queued so far
	queue   []bus.StoreSkipped
	dropped uint64
	notify  func()
}

// add queues r unless it was reported before, and says whether it is new.
func (l *skipLog) add(r bus.StoreSkipped) {
	l.mu.Lock()
	id := r.ID()
	if l.seen[id] {
		l.mu.Unlock()
		return
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if len(l.seen) >= bus.MaxSkipReports {
		l.dropped++
	} else {
		l.seen[id] = true
		l.queue = append(l.queue, r)
	}
	notify := l.notify
	l.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// OnSkip registers notify; reports queued before it are announced at once.
func (s *Store) OnSkip(notify func()) {
	s.skips.mu.Lock()
	s.skips.notify = notify
	queued := len(s.skips.queue) > 0 || s.skips.dropped > 0
	s.skips.mu.Unlock()
	if queued {
		notify()
	}
}

// TakeSkipped returns the reports queued since the last call and how many
// were dropped past the bound.
func (s *Store) TakeSkipped() ([]bus.StoreSkipped, uint64) {
	s.skips.mu.Lock()
	defer s.skips.mu.Unlock()
	q, d := s.skips.queue, s.skips.dropped
	s.skips.queue, s.skips.dropped = nil, 0
	return q, d
}

// skip reports a message the store does not read as events.
func (s *Store) skip(m *jsMessage, kind string, why error) {
	s.skips.add(bus.StoreSkipped{
		Store: s.describe, Stream: m.stream, Subject: m.subject, Kind: kind, Reason: why.Error(),
		Remove: fmt.Sprintf("nats stream rmm %s %d -f", s.opts.Stream, m.stream),
	})
}

// takeLocked reads a message another writer appended (or a message of
// this store's whose acknowledgement was lost) into the indexes, if it can
// be trusted to be what it says: a Kairo message on the log's subjects
// whose seqs come after every seq handed out before it, whose events are
// as many as its header says. The verdict depends on the stream alone, so
// every host that reads it reaches the same one and hands out the same
// seqs after it. It reports whether the message was indexed.
func (s *Store) takeLocked(m *jsMessage) bool {
	if m.bad != nil {
		s.skip(m, bus.SkipStray, m.bad)
		return false
	}
	if _, ok := s.writerHost(m.subject); !ok {
		s.skip(m, bus.SkipStray, fmt.Errorf("its subject %s is not one of the log's (%s, %s.>)", m.subject, s.logSubj, s.logSubj))
		return false
	}
	last := s.last.Load()
	if len(s.seqs) > 0 && m.first <= last {
		s.skip(m, bus.SkipStale, fmt.Errorf("it claims seqs %d..%d, and seqs up to %d were handed out before it: a writer that did not read the stream, or one that meant to overwrite events", m.first, m.last(), last))
		return false
	}
	if err := s.indexLocked(m); err != nil {
		s.skip(m, bus.SkipBroken, err)
		return false
	}
	if last > 0 && m.first > last+1 {
		s.skips.add(bus.StoreSkipped{Store: s.describe, Kind: bus.SkipGap, From: last + 1, To: m.first - 1,
			Reason: fmt.Sprintf("no message of the stream holds seqs %d..%d: they were removed from the stream, or message %d on %s skipped them", last+1, m.first-1, m.stream, m.subject)})
	}
	return true
}

// indexLocked adds a message read from the stream to both indexes, or to
// none when its events are not as its header says.
func (s *Store) indexLocked(m *jsMessage) error {
	ids := s.scratch.ids[:0]
	host, _ := s.writerHost(m.subject)
	var idErr error
	err := m.envs(func(seq uint64, env []byte) bool {
		var id []byte
		if id, idErr = envID(env); idErr != nil {
			return false
		}
		if host != "" {
			id = append(append(append(make([]byte, 0, len(host)+1+len(id)), host...), 0), id...)
		}
		ids = append(ids, id)
		return true
	})
	s.scratch.ids = ids[:0]
	if err == nil {
		err = idErr
	}
	if err != nil {
		return fmt.Errorf("message %d: %w", m.stream, err)
	}
	for i, id := range ids {
		s.ids.addBytes(id, m.first+uint64(i))
	}
	s.placeLocked(m)
	return nil
}

// idKey is the key of the ID id of host in the id index: IDs are each
// host's own, so that no writer on a shared stream can take an ID another
// host will publish and have that host's event dropped as its duplicate.
// A host of no name (a store of one host) keys IDs by themselves.
func idKey(host, id string) string {
	if host == "" {
		return id
	}
	return host + "\x00" + id
}

// errForged is what forgedError says of a message whose events name another
// host than its subject.
var errForged = errors.New("forged")

// forgedError says that an event names another host than its message's
// subject: the cluster's permissions let a host write its own subject
// alone, so the subject is the proof of who wrote it, and the event lies.
func forgedError(m *jsMessage, ev *abi.Event, host string) error {
	return fmt.Errorf("%w: event %s (%s) names host %q, and its message was written on %s, the subject of host %q", errForged, ev.ID, ev.Type, ev.Host, m.subject, host)
}
