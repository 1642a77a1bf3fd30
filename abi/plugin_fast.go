package abi

import (
	"time"
	"unsafe"
)

// The fast path of DecodeBatch, for the batches a plugin's guest decodes on
// every tick. Inside a Go wasm guest every function call costs tens of
// instructions, so the path reads a batch and its events in two loops with
// the common forms inline: fixmaps with fixstr keys, short strings. On
// anything else (another form, an error) it gives up, and DecodeBatch starts
// over on the general decoder, which also words the errors. Both decode any
// input to the same Batch, which FuzzBatchFastPath holds them to.
//
// Inside a guest, allocation costs as much as decoding: DecodeBatchReusing
// decodes into the events of the previous batch.

// DecodeBatchReusing decodes a [Batch] as [DecodeBatch] does, but into the
// capacity b.Events already has where it suffices, for a decoder that
// decodes batch after batch into one Batch (a guest SDK): the events of the
// previous batch are overwritten.
func DecodeBatchReusing(in []byte, b *Batch) error {
	events := b.Events[:0]
	if decodeBatchFast(in, b, events) {
		return nil
	}
	return decodeBatch(in, b)
}

// decodeBatchFast decodes in into b and reports whether it could; the events
// go into reuse when it has room for them.
func decodeBatchFast(in []byte, b *Batch, reuse []Event) bool {
	*b = Batch{}
	if len(in) == 0 || in[0]&0xf0 != 0x80 {
		return false
	}
	n, i := int(in[0]&0x0f), 1
	for ; n > 0; n-- {
		key, j, ok := fixKey(in, i)
		if !ok {
			return false
		}
		var rest []byte
		var err error
		switch key {
		case "time":
			b.Time, rest, err = readTime(in[j:])
			if b.Time.IsZero() {
				b.Time = time.Time{}
			}
		case "tick":
			b.Tick, rest, err = readUint(in[j:])
		case "events":
			if b.Events, i, ok = decodeEventsFast(in, j, reuse); !ok {
				return false
			}
			continue
		case "toolCalls":
			b.ToolCalls, rest, err = readSlice(in[j:], decodeToolCall)
		case "callResults":
			b.CallResults, rest, err = readSlice(in[j:], decodeCallResult)
		case "serviceCalls":
			b.ServiceCalls, rest, err = readSlice(in[j:], decodeServiceCall)
		default: // agent, which the general decoder reads, or a key it skips
			return false
		}
		if err != nil {
			return false
		}
		i = len(in) - len(rest)
	}
	return i == len(in)
}

// decodeEventsFast reads the array of events at in[i:], as readSlice with
// DecodeEvent would (but into reuse, if it has room), and returns the index
// after it.
func decodeEventsFast(in []byte, i int, reuse []Event) ([]Event, int, bool) {
	n, rest, err := readArrayLen(in[i:])
	if err != nil {
		return nil, 0, false
	}
	if n < 0 {
		return nil, len(in) - len(rest), true
	}
	i = len(in) - len(rest)
	evs := reuse[:0]
	if evs == nil || cap(evs) < n {
		evs = make([]Event, n)
	}
	evs = evs[:n]
	for k := range evs {
		j, ok := decodeEventFast(in, i, &evs[k])
		if !ok {
			rest, err := DecodeEvent(in[i:], &evs[k])
			if err != nil {
				return nil, 0, false
			}
			j = len(in) - len(rest)
		}
		i = j
	}
	return evs, i, true
}

// decodeEventFast decodes the event at in[i:] as DecodeEvent would, if it
// has the common form, and returns the index after it.
func decodeEventFast(in []byte, i int, ev *Event) (int, bool) {
	*ev = Event{}
	if i >= len(in) || in[i]&0xf0 != 0x80 {
		return 0, false
	}
	n := int(in[i] & 0x0f)
	i++
	var ok bool
	for ; n > 0; n-- {
		var key string
		if key, i, ok = fixKey(in, i); !ok {
			return 0, false
		}
		switch key {
		case "id":
			ev.ID, i, ok = shortStr(in, i)
		case "type":
			ev.Type, i, ok = shortStr(in, i)
		case "source":
			ev.Source, i, ok = shortStr(in, i)
		case "correlationId":
			ev.CorrelationID, i, ok = shortStr(in, i)
		case "causationId":
			ev.CausationID, i, ok = shortStr(in, i)
		case "time":
			t, rest, err := readTime(in[i:])
			if err != nil {
				return 0, false
			}
			if t.IsZero() {
				t = time.Time{}
			}
			ev.Time, i = t, len(in)-len(rest)
		case "data":
			raw, rest, err := readRaw(in[i:])
			if err != nil {
				return 0, false
			}
			ev.Data, i = raw, len(in)-len(rest)
		case "seq":
			v, rest, err := readUint(in[i:])
			if err != nil {
				return 0, false
			}
			ev.Seq, i = v, len(in)-len(rest)
		default:
			return 0, false
		}
		if !ok {
			return 0, false
		}
	}
	return i, true
}

// fixKey reads the fixstr at in[i:], the form encoders give map keys.
func fixKey(in []byte, i int) (string, int, bool) {
	if i >= len(in) || in[i]&0xe0 != 0xa0 {
		return "", 0, false
	}
	n := int(in[i] & 0x1f)
	i++
	if n > len(in)-i {
		return "", 0, false
	}
	return unsafe.String(unsafe.SliceData(in[i:]), n), i + n, true
}

// shortStr reads a non-empty fixstr or str 8 at in[i:], aliasing in.
func shortStr(in []byte, i int) (string, int, bool) {
	if i >= len(in) {
		return "", 0, false
	}
	c := in[i]
	var n int
	switch {
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
		i++
	case c == 0xd9 && i+1 < len(in):
		n = int(in[i+1])
		i += 2
	default:
		return "", 0, false
	}
	if n == 0 || n > len(in)-i {
		return "", 0, false
	}
	return unsafe.String(&in[i], n), i + n, true
}
