package abi

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// mirrorEvent has Event's fields and tags and no methods, so msgpack encodes
// and decodes it by reflection: the reference the hand-written codec must
// agree with.
type mirrorEvent struct {
	ID            string             `msgpack:"id"`
	Type          string             `msgpack:"type"`
	Source        string             `msgpack:"source,omitempty"`
	Time          time.Time          `msgpack:"time"`
	Data          msgpack.RawMessage `msgpack:"data,omitempty"`
	CorrelationID string             `msgpack:"correlationId,omitempty"`
	CausationID   string             `msgpack:"causationId,omitempty"`
	Seq           uint64             `msgpack:"seq,omitempty"`
	Host          string             `msgpack:"host,omitempty"`
}

// reversedEvent is mirrorEvent with its fields in the opposite order, so its
// encoding has the keys in the opposite order.
type reversedEvent struct {
	Host          string             `msgpack:"host,omitempty"`
	Seq           uint64             `msgpack:"seq,omitempty"`
	CausationID   string             `msgpack:"causationId,omitempty"`
	CorrelationID string             `msgpack:"correlationId,omitempty"`
	Data          msgpack.RawMessage `msgpack:"data,omitempty"`
	Time          time.Time          `msgpack:"time"`
	Source        string             `msgpack:"source,omitempty"`
	Type          string             `msgpack:"type"`
	ID            string             `msgpack:"id"`
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatalf("msgpack.Marshal(%T): %v", v, err)
	}
	return b
}

// sameEvent compares two events field by field, times by instant.
func sameEvent(a, b Event) bool {
	at, bt := a.Time, b.Time
	a.Time, b.Time = time.Time{}, time.Time{}
	return at.Equal(bt) && reflect.DeepEqual(a, b)
}

func codecCases(t testing.TB) []struct {
	name string
	ev   Event
} {
	data := func(v any) msgpack.RawMessage { return mustMarshal(t, v) }
	return []struct {
		name string
		ev   Event
	}{
		{"minimal", Event{ID: "0192d6c4-7a2e-7b3c-8d4e-5f6a7b8c9d0e", Type: "kairo.user.message", Time: time.Unix(1_700_000_000, 0)}},
		{"zero time", Event{ID: "x", Type: "a"}},
		{"all fields", Event{
			ID:            "0192d6c4-7a2e-7b3c-8d4e-5f6a7b8c9d0e",
			Type:          "kairo.agent.main.message",
			Source:        "plugin/rule-policy",
			Time:          time.Unix(1_700_000_000, 123_456_789),
			Data:          data(map[string]any{"text": "hello", "n": 3, "tags": []string{"a", "b"}}),
			CorrelationID: "intent-1",
			CausationID:   "cause-7",
			Seq:           42,
			Host:          "build-2",
		}},
		{"some optional", Event{ID: "id", Type: "kairo.tool.result", Time: time.Unix(5, 1), CausationID: "c", Seq: 1}},
		{"data only", Event{ID: "id", Type: "t", Time: time.Unix(1, 0), Data: data("just a string")}},
		{"bin data", Event{ID: "id", Type: "t", Time: time.Unix(1, 0), Data: data(bytes.Repeat([]byte{0xab}, 300))}},
		{"scalar data", Event{ID: "id", Type: "t", Time: time.Unix(1, 0), Data: data(-7)}},
		{"max seq", Event{ID: "id", Type: "t", Time: time.Unix(1, 0), Seq: 1<<64 - 1}},
		{"long strings", Event{ID: strings.Repeat("i", 300), Type: strings.Repeat("t.", 40) + "x", Source: strings.Repeat("é", 100), Time: time.Unix(1, 0)}},
		{"far future time", Event{ID: "id", Type: "t", Time: time.Date(2600, 1, 2, 3, 4, 5, 6, time.UTC)}},
		{"before 1970", Event{ID: "id", Type: "t", Time: time.Date(1901, 1, 2, 3, 4, 5, 6, time.UTC)}},
	}
}

func TestEventRoundTrip(t *testing.T) {
	for _, tc := range codecCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			b := mustMarshal(t, &tc.ev)
			var got Event
			if err := msgpack.Unmarshal(b, &got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !sameEvent(got, tc.ev) {
				t.Errorf("round trip changed the event:\n got %+v\nwant %+v", got, tc.ev)
			}
		})
	}
}

// An Event is encodable by value too, inside packets or on its own: the
// reflection codec cannot take the address of a value to call a pointer
// method.
func TestEventMarshalByValue(t *testing.T) {
	ev := Event{ID: "id", Type: "kairo.user.message", Time: time.Unix(1, 0), Seq: 3}
	for _, v := range []any{ev, EventPacket{Subscription: 1, Event: ev}, PublishParams{Event: ev}, []Event{ev}} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Errorf("Marshal(%T): %v", v, err)
			continue
		}
		back := reflect.New(reflect.TypeOf(v))
		if err := msgpack.Unmarshal(b, back.Interface()); err != nil {
			t.Errorf("Unmarshal(%T): %v", v, err)
		}
	}
	var pkt EventPacket
	if err := msgpack.Unmarshal(mustMarshal(t, EventPacket{Subscription: 9, Event: ev}), &pkt); err != nil {
		t.Fatal(err)
	}
	if pkt.Subscription != 9 || !sameEvent(pkt.Event, ev) {
		t.Errorf("EventPacket round trip: got %+v", pkt)
	}
	var nilEv *Event
	if b := mustMarshal(t, nilEv); !bytes.Equal(b, []byte{0xc0}) {
		t.Errorf("nil *Event encodes as % x, want c0 (nil)", b)
	}
}

func TestEventOmitsEmptyOptionalFields(t *testing.T) {
	tests := []struct {
		ev   Event
		keys []string
	}{
		{Event{ID: "i", Type: "t"}, []string{"id", "time", "type"}},
		{Event{ID: "i", Type: "t", Source: "s"}, []string{"id", "source", "time", "type"}},
		{Event{ID: "i", Type: "t", Data: msgpack.RawMessage{0x01}, Seq: 1}, []string{"data", "id", "seq", "time", "type"}},
		{Event{ID: "i", Type: "t", Source: "s", Data: msgpack.RawMessage{0x01}, CorrelationID: "c", CausationID: "k", Seq: 9},
			[]string{"causationId", "correlationId", "data", "id", "seq", "source", "time", "type"}},
	}
	for _, tc := range tests {
		var m map[string]any
		if err := msgpack.Unmarshal(mustMarshal(t, &tc.ev), &m); err != nil {
			t.Fatalf("decode %+v as a map: %v", tc.ev, err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tc.keys) {
			t.Errorf("%+v encodes keys %v, want %v", tc.ev, keys, tc.keys)
		}
	}
}

func TestEventDecodeSkipsUnknownKeys(t *testing.T) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(enc.EncodeMapLen(6))
	must(enc.EncodeString("future"))
	must(enc.Encode(map[string]any{"nested": []any{1, "two", map[string]any{"x": nil}}, "f": 1.5}))
	must(enc.EncodeString("id"))
	must(enc.EncodeString("the-id"))
	must(enc.EncodeString("blob"))
	must(enc.EncodeBytes(make([]byte, 70000)))
	must(enc.EncodeString("type"))
	must(enc.EncodeString("kairo.x"))
	must(enc.EncodeString("ext"))
	must(enc.EncodeExtHeader(42, 3))
	_, err := buf.Write([]byte{1, 2, 3})
	must(err)
	must(enc.EncodeString("seq"))
	must(enc.EncodeUint(7))

	var got Event
	if err := msgpack.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("Unmarshal with unknown keys: %v", err)
	}
	want := Event{ID: "the-id", Type: "kairo.x", Seq: 7}
	if !sameEvent(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestEventDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		value any // encoded as the whole message
		want  string
	}{
		{"id not a string", map[string]any{"id": 42}, `field "id"`},
		{"type not a string", map[string]any{"type": true}, `field "type"`},
		{"source not a string", map[string]any{"source": []int{1}}, `field "source"`},
		{"time an int", map[string]any{"time": 42}, `field "time"`},
		{"time a bad string", map[string]any{"time": "yesterday"}, `field "time"`},
		{"correlationId not a string", map[string]any{"correlationId": 1.5}, `field "correlationId"`},
		{"causationId not a string", map[string]any{"causationId": map[string]int{"a": 1}}, `field "causationId"`},
		{"seq not a number", map[string]any{"seq": "seven"}, `field "seq"`},
		{"seq negative", map[string]any{"seq": -1}, `field "seq"`},
		{"time another extension", map[string]any{"time": &msgpack.RawMessage{0xd6, 0x05, 0, 0, 0, 1}}, `field "time"`},
		{"time nanoseconds out of range", map[string]any{"time": &msgpack.RawMessage{0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}}, `field "time"`},
		{"unknown key nested too deep", map[string]any{"future": deepArray(100_000)}, `field "future"`},
		// msgpack reads the whole value before the codec sees a key, so
		// only DecodeEvent can say which one.
		{"unknown key longer than the input", map[string]any{"future": &msgpack.RawMessage{0xdd, 0x7f, 0xff, 0xff, 0xff, 0x01}}, "event: "},
		{"not a map", []string{"id", "x"}, "want a map"},
		{"non-string key", map[int]string{1: "x"}, "map key 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := mustMarshal(t, tc.value)
			var ev Event
			err := msgpack.Unmarshal(in, &ev)
			if err == nil {
				t.Fatalf("decoded %+v into %+v without error", tc.value, ev)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			want := tc.want
			if want == "event: " {
				want = `field "future"`
			}
			if _, err := DecodeEvent(in, &ev); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("DecodeEvent error %v does not mention %q", err, want)
			}
		})
	}
	t.Run("nil", func(t *testing.T) {
		// msgpack.Unmarshal turns nil into the zero Event itself; the codec
		// sees nil only when called directly, as the SQLite store does.
		var ev Event
		err := ev.DecodeMsgpack(msgpack.NewDecoder(bytes.NewReader([]byte{0xc0})))
		if err == nil || !strings.Contains(err.Error(), "want a map") {
			t.Errorf("DecodeMsgpack(nil) = %v, want an error saying it wants a map", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		ev := codecCases(t)[2].ev
		b := mustMarshal(t, &ev)
		for n := range len(b) {
			var got Event
			if err := msgpack.Unmarshal(b[:n], &got); err == nil {
				t.Fatalf("decoding the first %d of %d bytes succeeded: %+v", n, len(b), got)
			}
		}
	})
}

// deepArray is n nested one-element arrays around a nil.
func deepArray(n int) *msgpack.RawMessage {
	b := bytes.Repeat([]byte{0x91}, n)
	b = append(b, 0xc0)
	m := msgpack.RawMessage(b)
	return &m
}

// DecodeEvent reads one event from the front of a buffer and returns the rest.
func TestDecodeEventStream(t *testing.T) {
	cases := codecCases(t)
	var stream []byte
	for _, tc := range cases {
		stream = append(stream, mustMarshal(t, &tc.ev)...)
	}
	stream = append(stream, 0x01, 0x02)
	rest := stream
	for _, tc := range cases {
		var ev Event
		var err error
		if rest, err = DecodeEvent(rest, &ev); err != nil {
			t.Fatalf("%s: DecodeEvent: %v", tc.name, err)
		}
		if !sameEvent(ev, tc.ev) {
			t.Errorf("%s: got %+v, want %+v", tc.name, ev, tc.ev)
		}
	}
	if !bytes.Equal(rest, []byte{0x01, 0x02}) {
		t.Errorf("after the last event DecodeEvent left % x, want 01 02", rest)
	}
}

// The hand-written codec and the reflection codec over the same tags must be
// interchangeable: same bytes out, same values in.
func TestEventMatchesReflectionCodec(t *testing.T) {
	for _, tc := range codecCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			mirror := mirrorEvent(tc.ev)
			fromEvent := mustMarshal(t, &tc.ev)
			fromMirror := mustMarshal(t, &mirror)
			// Byte for byte the same, but for the reflection codec writing
			// uint64 in 8 bytes unless asked for compact ints.
			var compact bytes.Buffer
			enc := msgpack.NewEncoder(&compact)
			enc.UseCompactInts(true)
			if err := enc.Encode(&mirror); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fromEvent, compact.Bytes()) {
				t.Errorf("encodings differ:\n event  % x\n mirror % x", fromEvent, compact.Bytes())
			}

			// Reflection bytes into Event, Event bytes into the mirror.
			var ev Event
			if err := msgpack.Unmarshal(fromMirror, &ev); err != nil {
				t.Fatalf("Unmarshal mirror bytes into Event: %v", err)
			}
			var m mirrorEvent
			if err := msgpack.Unmarshal(fromEvent, &m); err != nil {
				t.Fatalf("Unmarshal Event bytes into mirror: %v", err)
			}
			if !reflect.DeepEqual(mirrorEvent(ev), m) {
				t.Errorf("decoders disagree:\n Event  %+v\n mirror %+v", ev, m)
			}
			if !sameEvent(ev, tc.ev) {
				t.Errorf("mirror bytes decode to %+v, want %+v", ev, tc.ev)
			}

			// Keys in another order decode the same.
			rev := reversedEvent{tc.ev.Host, tc.ev.Seq, tc.ev.CausationID, tc.ev.CorrelationID, tc.ev.Data, tc.ev.Time, tc.ev.Source, tc.ev.Type, tc.ev.ID}
			var fromRev Event
			if err := msgpack.Unmarshal(mustMarshal(t, &rev), &fromRev); err != nil {
				t.Fatalf("Unmarshal reversed keys: %v", err)
			}
			if !reflect.DeepEqual(fromRev, ev) {
				t.Errorf("reversed key order decodes to %+v, want %+v", fromRev, ev)
			}
		})
	}
}

// Decoding overwrites every field, so a reused Event carries nothing over.
func TestEventDecodeResets(t *testing.T) {
	full := codecCases(t)[2].ev
	ev := full
	if err := msgpack.Unmarshal(mustMarshal(t, &Event{ID: "b", Type: "t"}), &ev); err != nil {
		t.Fatal(err)
	}
	want := Event{ID: "b", Type: "t"}
	if !sameEvent(ev, want) || ev.Data != nil {
		t.Errorf("reused event decodes to %+v, want %+v", ev, want)
	}
}

func FuzzEventDecode(f *testing.F) {
	for _, tc := range codecCases(f) {
		f.Add(mustMarshal(f, &tc.ev))
	}
	f.Add([]byte{0x80})                                                // empty map
	f.Add([]byte{0x81, 0xa4, 'd', 'a', 't', 'a', 0xc0})                // data: nil
	f.Add([]byte{0x81, 0xa4, 't', 'i', 'm', 'e', 0x92, 0x01, 0x02})    // legacy time array
	f.Add([]byte{0x81, 0xa3, 's', 'e', 'q', 0xd0, 0x80})               // seq: int8
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})                        // huge map, no entries
	f.Add([]byte{0x81, 0xa1, 'x', 0xc7, 0x05, 0x01, 0x00, 0x00, 0x00}) // truncated ext
	for _, b := range [][]byte{
		{0x81, 0xa2, 'i', 'd', 0xd9, 0x03, 'a', 'b'},                                     // str8 cut short
		{0x81, 0xa4, 'd', 'a', 't', 'a', 0xc5, 0x00, 0x02, 0x01},                         // bin16 cut short
		{0x81, 0xa4, 'd', 'a', 't', 'a', 0xc4, 0x01, 0x07},                               // bin8
		{0x81, 0xa4, 't', 'i', 'm', 'e', 0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}, // nanoseconds out of range
		{0x82, 0xa4, 't', 'y', 'p', 'e', 0xa1, 'a', 0xa4, 't', 'y', 'p', 'e', 0xa0},      // a key twice
		{0x81, 0xd9, 0x02, 'i', 'd', 0xa1, 'x'},                                          // a str8 key
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 0 && in[0] == 0xc0 {
			return // nil: msgpack gives the zero Event without calling the codec
		}
		var ev Event
		rest, err := DecodeEvent(in, &ev)
		// The flat reader takes what it can and leaves the rest to the
		// general walk: together they read what the walk alone reads.
		var walked Event
		wrest, werr := decodeEventMap(in, &walked)
		if fmt.Sprint(err) != fmt.Sprint(werr) || err == nil && (!reflect.DeepEqual(ev, walked) || len(rest) != len(wrest)) {
			t.Fatalf("DecodeEvent and the general walk disagree on % x:\n %+v, %d left, %v\n %+v, %d left, %v", in, ev, len(rest), err, walked, len(wrest), werr)
		}
		// msgpack's reader on the same bytes. A fresh decoder, not
		// msgpack.Unmarshal: Unmarshal's pooled decoders grow their buffer
		// by 1 MB per input that declares a long string it does not hold,
		// which turns a fuzzing run into an out-of-memory kill.
		var viaDecoder Event
		derr := msgpack.NewDecoder(bytes.NewReader(in)).Decode(&viaDecoder)
		if (err == nil) != (derr == nil) {
			t.Fatalf("DecodeEvent error %v, msgpack.Decoder error %v, on % x", err, derr, in)
		}
		if err != nil {
			return
		}
		if len(rest) >= len(in) {
			t.Fatalf("DecodeEvent consumed nothing of % x", in)
		}
		if !sameEvent(viaDecoder, ev) {
			t.Fatalf("DecodeEvent and msgpack.Decoder disagree on % x:\n %+v\n %+v", in, ev, viaDecoder)
		}
		// DecodeEvent has checked every length against the input, so
		// Unmarshal is safe here.
		var un Event
		if err := msgpack.Unmarshal(in, &un); err != nil || !sameEvent(un, ev) {
			t.Fatalf("msgpack.Unmarshal(% x) = %+v, %v; want %+v", in, un, err, ev)
		}

		b, err := msgpack.Marshal(&ev)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", ev, err)
		}
		var again Event
		if err := msgpack.Unmarshal(b, &again); err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v (bytes % x)", ev, err, b)
		}
		if !sameEvent(again, ev) {
			t.Fatalf("re-encoding changed the event:\n first  %+v\n second %+v", ev, again)
		}
		// The reflection codec reads the re-encoded bytes the same way.
		var m mirrorEvent
		if err := msgpack.Unmarshal(b, &m); err != nil {
			t.Fatalf("reflection codec rejects % x: %v", b, err)
		}
		if !reflect.DeepEqual(mirrorEvent(again), m) {
			t.Fatalf("decoders disagree on % x:\n Event  %+v\n mirror %+v", b, again, m)
		}
	})
}
