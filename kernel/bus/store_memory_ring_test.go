package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// randomEvent is an event with every field the ring keeps drawn at random:
// strings of every length the bus allows, empty or not, data nil, empty or
// not, and times with and without a monotonic reading, in nil, Local, UTC
// and ever new fixed zones. ID, Time and Source are sometimes left to the
// bus; an ID is sometimes one published before, or one out of order.
func randomEvent(r *rand.Rand, n int, ids []string) *abi.Event {
	str := func(max int) string {
		if r.IntN(3) == 0 {
			return ""
		}
		b := make([]byte, r.IntN(max+1))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	}
	ev := &abi.Event{
		Type:          fmt.Sprintf("kairo.t%d.%s", r.IntN(5), strings.Repeat("x", 1+r.IntN(200))),
		Source:        str(abi.MaxSourceLen),
		CorrelationID: str(abi.MaxIDLen),
		CausationID:   str(abi.MaxIDLen),
	}
	switch r.IntN(8) {
	case 0:
		ev.ID = fmt.Sprintf("random-%d-%d", r.IntN(1000), n) // below the bus's: byID
	case 1:
		if len(ids) > 0 {
			ev.ID = ids[r.IntN(len(ids))] // a duplicate, if still held
		}
	}
	switch r.IntN(4) {
	case 0:
	case 1:
		ev.Data = []byte{}
	default:
		ev.Data = []byte(str(4096))
	}
	switch r.IntN(6) {
	case 0:
		// zero: the bus's clock, with a monotonic reading
	case 1:
		ev.Time = time.Now()
	case 2:
		ev.Time = time.Unix(r.Int64N(1<<40), r.Int64N(1e9))
	case 3:
		ev.Time = time.Unix(r.Int64N(1<<40), 0).UTC()
	default:
		ev.Time = time.Unix(r.Int64N(1<<40), 0).In(time.FixedZone(fmt.Sprint("Z", n), r.IntN(50000)))
	}
	return ev
}

// Every event a subscriber of the ring receives, and every event read back
// from it, is the event as published: the same strings, the same data
// slice, the same time (location pointer and monotonic reading included);
// a subscriber that falls behind the ring gets them until the gap, then
// the *GapError. A ring that keeps its events in another form must pass it
// (97d4d41 tried one).
func TestMemoryStoreEventsAsPublished(t *testing.T) {
	for _, ring := range []int{64, 1000} {
		t.Run(fmt.Sprintf("ring=%d", ring), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(ring)))
			b := New(NewMemoryStore(ring), Config{SubscriberBuffer: 16})
			defer b.Close()
			var mu sync.Mutex
			var live []abi.Event
			all := make(chan struct{})
			const n = 5000
			sub, err := b.Subscribe(context.Background(), "kairo.>", SubscribeConfig{}, func(evs []abi.Event) error {
				mu.Lock()
				defer mu.Unlock()
				if live = append(live, evs...); len(live) == n {
					close(all)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if sub.ring == nil {
				t.Fatal("the subscription does not read the ring")
			}
			// stuck waits in its first call until the end: it falls
			// behind the ring and must end with a gap.
			release := make(chan struct{})
			var releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) })
			var stuckGot []abi.Event
			stuck, err := b.Subscribe(context.Background(), "kairo.>", SubscribeConfig{}, func(evs []abi.Event) error {
				if len(stuckGot) == 0 {
					<-release
				}
				stuckGot = append(stuckGot, evs...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var want []abi.Event
			var ids []string
			for len(want) < n {
				ev := randomEvent(r, len(want), ids)
				res, err := b.Publish(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				if res.Duplicate {
					continue
				}
				want = append(want, *ev)
				ids = append(ids, ev.ID)
				if len(want)%(ring/2) == 0 {
					// Now and then the live subscriber catches up, so
					// that it never falls past the ring.
					deadline := time.Now().Add(10 * time.Second)
					for sub.pos.Load() <= uint64(len(want)) && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
			}
			select {
			case <-all:
			case <-time.After(30 * time.Second):
				t.Fatalf("the subscriber received %d of %d events", len(live), n)
			}
			runtime.GC() // what a subscriber holds must stay as it was
			mu.Lock()
			for i := range want {
				sameEvent(t, "live", live[i], want[i])
			}
			mu.Unlock()
			held := 0
			if err := b.Replay(context.Background(), Query{FromSeq: uint64(n - ring + 1)}, func(ev *abi.Event) error {
				held++
				sameEvent(t, "replayed", *ev, want[ev.Seq-1])
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if held != ring {
				t.Errorf("replayed %d events, want the ring's %d", held, ring)
			}
			releaseOnce.Do(func() { close(release) })
			<-stuck.Done()
			var gap *GapError
			if err := stuck.Err(); !errors.As(err, &gap) || gap.To != uint64(n-ring) {
				t.Fatalf("the stuck subscription ended with %v, want a gap up to %d", err, n-ring)
			}
			if len(stuckGot) == 0 || uint64(len(stuckGot)) >= gap.From {
				t.Fatalf("the stuck subscription got %d events before a gap from %d", len(stuckGot), gap.From)
			}
			for i := range stuckGot {
				sameEvent(t, "before the gap", stuckGot[i], want[i])
			}
		})
	}
}

func sameEvent(t *testing.T, what string, got, want abi.Event) {
	t.Helper()
	if got.Time != want.Time || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s event %d:\n got %#v\nwant %#v", what, want.Seq, got, want)
	}
	if len(want.Data) > 0 && &got.Data[0] != &want.Data[0] || cap(got.Data) != cap(want.Data) {
		t.Fatalf("%s event %d: its data is not the publisher's slice", what, want.Seq)
	}
}
