package console

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// indexSpan bounds the seqs the run index covers: two windows of the
// largest read, 160 kB of seqs at most.
const indexSpan = 2 * MaxEventsLimit

// maxRanges bounds the ranges one indexed read asks the store for; run
// loops scattered wider are read as one range, as without the index.
const maxRanges = 16

// rangeGap is the run of events outside run loops a read rather reads
// through than asks the store for twice.
const rangeGap = 64

// runIndex knows which seqs of a span of the log are in run loops
// (outsideRuns is false), so that a read with outside=K asks the store
// for those events and the newest K others, not for every event of the
// window: the log's events never change once appended, so what a read
// decoded once need not be decoded again to be skipped. It learns from
// the reads themselves: a read decodes the part of its window the index
// does not cover yet, and the index covers it after.
type runIndex struct {
	mu         sync.Mutex
	from, upto uint64   // the span covered, from..upto; empty when upto < from
	inside     []uint64 // the seqs of the span in run loops, ascending
}

// indexLinger is how long the run index's subscription holds a delivery
// back, to be woken once for what came meanwhile.
const indexLinger = 50 * time.Millisecond

// observe indexes the events the log delivers: those after the span
// extend it, those it covers are known, and after a hole (a store's
// eviction, a subscription resumed past events) the span starts again.
func (x *runIndex) observe(evs []abi.Event) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range evs {
		ev := &evs[i]
		switch {
		case x.upto != 0 && x.from <= x.upto && ev.Seq <= x.upto:
			continue
		case x.upto == 0 || x.upto < x.from || ev.Seq != x.upto+1:
			x.from, x.inside = ev.Seq, x.inside[:0]
		}
		x.upto = ev.Seq
		if !outsideRuns(ev) {
			x.inside = append(x.inside, ev.Seq)
		}
	}
	x.bound()
	return nil
}

// bound forgets the oldest of the span beyond indexSpan.
func (x *runIndex) bound() {
	if x.upto-x.from >= indexSpan {
		x.from = x.upto - indexSpan + 1
		i, _ := slices.BinarySearch(x.inside, x.from)
		x.inside = append(x.inside[:0], x.inside[i:]...)
	}
}

// seqRange is the seqs from..to, and whether the index learns from them.
type seqRange struct {
	from, to uint64
	learn    bool
}

// read hands pg the events of lo..to it answers with pg.outside >= 0,
// in ascending order, and counts in pg.omitted the events outside run
// loops it did not read. On an error pg holds part of the answer.
func (x *runIndex) read(ctx context.Context, b *bus.Bus, lo, to uint64, pg *eventPage) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.upto == 0 || x.upto < x.from || lo > x.upto+1 || to+1 < x.from || max(to, x.upto)-min(lo, x.from) >= indexSpan {
		// Nothing of the window is known, or it is too far from the span
		// known: the window becomes the span.
		x.from, x.upto, x.inside = lo, lo-1, x.inside[:0]
	}
	var plan []seqRange
	if lo < x.from {
		plan = append(plan, seqRange{lo, x.from - 1, true})
	}
	a, z := max(lo, x.from), min(to, x.upto)
	skipped := uint64(0)
	if a <= z {
		var covered []seqRange
		covered, skipped = x.plan(a, z, pg.outside)
		plan = append(plan, covered...)
	}
	if to > x.upto {
		plan = append(plan, seqRange{max(x.upto+1, lo), to, true})
	}
	var learned []uint64
	for _, r := range plan {
		fn := pg.add
		if r.learn {
			fn = func(ev *abi.Event) error {
				if !outsideRuns(ev) {
					learned = append(learned, ev.Seq)
				}
				return pg.add(ev)
			}
		}
		if err := b.Replay(ctx, bus.Query{FromSeq: r.from, ToSeq: r.to}, fn); err != nil {
			var gap *bus.GapError
			if errors.As(err, &gap) {
				// A bounded store dropped events the index knows: it
				// starts again.
				x.from, x.upto, x.inside = 1, 0, x.inside[:0]
			}
			return err
		}
	}
	pg.omitted += int(skipped)
	// The span grows by what was read whole; the oldest beyond indexSpan
	// is forgotten.
	x.inside = append(x.inside, learned...)
	slices.Sort(x.inside)
	x.inside = slices.Compact(x.inside)
	x.from, x.upto = min(x.from, lo), max(x.upto, to)
	x.bound()
	return nil
}

// plan is the ranges of a..z, which the index covers, that hold its
// events in run loops and its newest k others, and how many events
// outside run loops the ranges leave out.
func (x *runIndex) plan(a, z uint64, k int) ([]seqRange, uint64) {
	i, _ := slices.BinarySearch(x.inside, a)
	j, _ := slices.BinarySearch(x.inside, z+1)
	in := x.inside[i:j]
	// tail: the newest k events outside run loops begin there.
	tail, n := z+1, len(in)-1
	for left := k; left > 0 && tail > a; {
		tail--
		if n >= 0 && in[n] == tail {
			n--
		} else {
			left--
		}
	}
	var out []seqRange
	for _, s := range in[:n+1] {
		if len(out) > 0 && s <= out[len(out)-1].to+rangeGap {
			out[len(out)-1].to = s
		} else {
			out = append(out, seqRange{from: s, to: s})
		}
	}
	if tail <= z {
		if len(out) > 0 && tail <= out[len(out)-1].to+rangeGap {
			out[len(out)-1].to = z
		} else {
			out = append(out, seqRange{from: tail, to: z})
		}
	}
	if len(out) > maxRanges {
		out = append(out[:0], seqRange{from: out[0].from, to: z})
	}
	read := uint64(0)
	for _, r := range out {
		read += r.to - r.from + 1
	}
	return out, (z - a + 1) - read
}
