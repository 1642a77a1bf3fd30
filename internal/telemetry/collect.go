package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// MaxScan bounds the events one export of past run loops reads.
const MaxScan = 2_000_000

// Collected are the spans of past run loops, read again from the log.
type Collected struct {
	Spans []Span
	// Loops are the run loops found, Open those of them that have not
	// ended (their root span is sent when they end).
	Loops, Open []string
	Scanned     int
}

// Collect reads the spans of the run loops named, or, with none named,
// of every run loop that started at or after since, from the log of bus b.
func Collect(ctx context.Context, b *bus.Bus, loops []string, since time.Time) (*Collected, error) {
	bld := NewBuilder(b.Host(), nil)
	q := bus.Query{Since: since}
	want := map[string]bool{}
	if len(loops) > 0 {
		bld.Only(loops...)
		q.Since = time.Time{}
		for _, id := range loops {
			want[id] = true
			// A run loop id is a UUIDv7, which begins with its time: the
			// log is read from a little before it.
			if u, err := uuid.Parse(id); err == nil && u.Version() == 7 {
				sec, nsec := u.Time().UnixTime()
				t := time.Unix(sec, nsec).Add(-5 * time.Second)
				if q.Since.IsZero() || t.Before(q.Since) {
					q.Since = t
				}
			} else {
				q.Since = time.Time{}
				break
			}
		}
	}
	c := &Collected{}
	seen := map[string]bool{}
	ended := 0
	err := b.Replay(ctx, q, func(ev *abi.Event) error {
		c.Scanned++
		if c.Scanned > MaxScan {
			return fmt.Errorf("more than %d events to read: name the run loops, or a shorter --since", MaxScan)
		}
		c.Spans = bld.Add(ev, c.Spans)
		id := ev.CorrelationID
		switch {
		case ev.Type == abi.SubjectIntentStarted && !seen[id] && bld.Open(id):
			seen[id] = true
			c.Loops = append(c.Loops, id)
		case ev.Type == abi.SubjectIntentEnded && want[id] && seen[id] && !bld.Open(id):
			if ended++; ended == len(want) {
				return bus.ErrStop
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, bus.ErrStop) {
		return nil, err
	}
	for _, id := range c.Loops {
		if bld.Open(id) {
			c.Open = append(c.Open, id)
		}
	}
	return c, nil
}

// Send exports spans to exp, at most 512 at a time, as the service res
// names.
func Send(ctx context.Context, exp Uploader, res Resource, spans []Span) error {
	const batch = 512
	for len(spans) > 0 {
		n := min(batch, len(spans))
		if err := exp.UploadTraces(ctx, toOTLP(res, spans[:n])); err != nil {
			return err
		}
		spans = spans[n:]
	}
	return nil
}
