package abi

import (
	"bytes"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// agentCodec is one of the agent's hand-written codecs with the values it
// is tested on; the functions take and return values of its type.
type agentCodec struct {
	name   string
	values []any
	append func(v any) []byte
	decode func(b []byte) (any, error) // nil: no decoder
	fast   func(b []byte) (any, bool)
	lib    func(b []byte) (any, error) // the reflection codec, a panic an error
}

func codecOf[T any](name string, app func([]byte, *T) []byte, dec func([]byte, *T) error, fast func([]byte, *T) bool, vals ...T) agentCodec {
	c := agentCodec{
		name:   name,
		append: func(v any) []byte { t := v.(T); return app(nil, &t) },
		lib: func(b []byte) (any, error) {
			var v T
			err := unmarshalReflected(b, &v)
			return v, err
		},
	}
	for _, v := range vals {
		c.values = append(c.values, v)
	}
	if dec != nil {
		c.decode = func(b []byte) (any, error) {
			var v T
			err := dec(b, &v)
			return v, err
		}
		c.fast = func(b []byte) (any, bool) {
			var v T
			ok := fast(b, &v)
			return v, ok
		}
	}
	return c
}

func agentCodecs() []agentCodec {
	long := strings.Repeat("ü", 200) // 400 bytes: a str16
	longer := strings.Repeat("x", 70000)
	many := make([]string, 17) // past a fixarray
	for i := range many {
		many[i] = "id-" + strings.Repeat("7", i)
	}
	asks := []*Ask{
		nil,
		{},
		{Agent: "ops", ActionID: "a-1", RunLoopID: "run-1", Depth: 1, Grants: GrantsIntersection},
		{Agent: "ops", Depth: 300, Grants: GrantsOwn, Within: []string{"default", "ops"}},
		{Depth: -40, Within: []string{}},
		{Depth: math.MaxInt64, Within: many},
		{Depth: math.MinInt64, Agent: long},
	}
	var messages []UserMessage
	for _, a := range asks {
		messages = append(messages, UserMessage{Text: "run make", MessageID: "m-1", Ask: a})
	}
	messages = append(messages,
		UserMessage{},
		UserMessage{Text: "@ops restart it 🚀", MessageID: "01J0", RunLoopID: "run-9", Agent: "ops"},
		UserMessage{Text: strings.Repeat("a", 31), MessageID: strings.Repeat("b", 32)},
		UserMessage{Text: strings.Repeat("c", 255), MessageID: strings.Repeat("d", 256)},
		UserMessage{Text: longer, Agent: long},
		UserMessage{Text: "nul\x00 and invalid \xff utf-8"},
	)
	datas := []ActionData{
		{},
		{Text: "ok", Done: true},
		{Tool: "process.spawn", Args: `{"argv":["make","-j8"]}`, RunLoopID: "run-1"},
		{Reason: "the user said stop", Keep: true},
		{Approval: "ap-1", Text: long, Tool: "t", Args: "{}", RunLoopID: "r", Reason: "why", Done: true, Keep: true},
	}
	var actions []ActionEvent
	for i, d := range datas {
		actions = append(actions, ActionEvent{Type: ActionSay, ActionData: d, Tick: uint64(i) * 1000, For: asks[i%len(asks)]})
	}
	actions = append(actions,
		ActionEvent{},
		ActionEvent{Type: ActionToolCall, Tick: 1, ActionData: ActionData{Tool: "x"}},
		ActionEvent{Type: ActionQuery, Tick: math.MaxUint64},
		ActionEvent{Type: ActionCancel, Tick: 127, For: asks[3]},
	)
	started := []IntentStarted{
		{},
		{RunLoopID: "run-1", Agent: "default", Goal: "build it"},
		{RunLoopID: "run-2", Agent: "ops", Goal: long, MessageID: "m-2", MaxIterations: 25, Ask: asks[2]},
		{MaxIterations: -1},
		{MaxIterations: 1 << 40, Goal: longer},
	}
	ended := []IntentEnded{
		{},
		{RunLoopID: "run-1", Status: "done"},
		{RunLoopID: "run-1", Status: "canceled", Summary: long},
	}
	at := time.Date(2026, 11, 29, 10, 30, 0, 123456789, time.UTC).Local()
	records := []TickRecord{
		{},
		{Tick: 7, At: at, Hz: 1000, Seq: 42},
		{Tick: 1 << 40, At: time.Unix(1<<35, 1), Hz: 0.5, Seq: math.MaxUint64, Pending: []string{"e-1"}, Observed: many, Results: 3, Memory: long, MemoryChanged: true},
		{At: time.Unix(1_700_000_000, 0), Hz: math.Inf(1), MemoryChanged: true},
		{At: time.Unix(-5, 0), Hz: -2.25, Pending: many, Results: -9},
		{At: time.Unix(1<<33, 999999999), Observed: []string{""}},
	}
	thoughts := []Thought{{}, {Text: "thinking", Tick: 9}, {Text: long, Tick: math.MaxUint64}}
	return []agentCodec{
		codecOf("UserMessage", AppendUserMessage, DecodeUserMessage, decodeUserMessage, messages...),
		codecOf("ActionData", AppendActionData, DecodeActionData, decodeActionData, datas...),
		codecOf("ActionEvent", AppendActionEvent, DecodeActionEvent, decodeActionEvent, actions...),
		codecOf("IntentStarted", AppendIntentStarted, DecodeIntentStarted, decodeIntentStarted, started...),
		codecOf("IntentEnded", AppendIntentEnded, DecodeIntentEnded, decodeIntentEnded, ended...),
		codecOf("TickRecord", AppendTickRecord, DecodeTickRecord, decodeTickRecord, records...),
		codecOf[Thought]("Thought", AppendThought, nil, nil, thoughts...),
	}
}

// sameValue compares two decoded values, by their encoding where DeepEqual
// cannot (a NaN).
func sameValue(c agentCodec, a, b any) bool {
	return reflect.DeepEqual(a, b) || bytes.Equal(c.append(a), c.append(b))
}

// The hand-written codecs and the reflection codec over the same tags must
// be interchangeable: the same bytes out, the same values in, and the fast
// path taken for what the encoders write.
func TestAgentCodecMatchesReflectionCodec(t *testing.T) {
	for _, c := range agentCodecs() {
		for i, v := range c.values {
			want, err := msgpack.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got := c.append(v)
			if !bytes.Equal(got, want) {
				t.Errorf("%s %d: wrote\n % x\nthe reflection codec writes\n % x", c.name, i, got, want)
				continue
			}
			if c.decode == nil {
				continue
			}
			lib, err := c.lib(want)
			if err != nil {
				t.Fatalf("%s %d: the reflection codec rejects its own bytes: %v", c.name, i, err)
			}
			dec, err := c.decode(want)
			if err != nil || !reflect.DeepEqual(dec, lib) {
				t.Errorf("%s %d: decoded %#v (%v), the reflection codec %#v", c.name, i, dec, err, lib)
			}
			if fast, ok := c.fast(want); !ok || !reflect.DeepEqual(fast, lib) {
				t.Errorf("%s %d: the fast path gave %#v (ok %v), want %#v", c.name, i, fast, ok, lib)
			}
		}
	}
}

// What the fast path does not read — other forms of a value, keys it does
// not know or sees twice, structs as arrays, bytes after the value, input
// cut short — decodes as the reflection codec decodes it, or fails where
// it fails.
func TestAgentDecodeOtherForms(t *testing.T) {
	var arrays bytes.Buffer
	enc := msgpack.NewEncoder(&arrays)
	enc.UseArrayEncodedStructs(true)
	for _, c := range agentCodecs() {
		if c.decode == nil {
			continue
		}
		var inputs [][]byte
		for _, v := range c.values {
			b := c.append(v)
			inputs = append(inputs, b, append(b[:len(b):len(b)], 0xc0), b[:len(b)/2], b[:len(b)-1])
			arrays.Reset()
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, bytes.Clone(arrays.Bytes()))
			// A key of a later version, first and last.
			if b[0]&0xf0 == 0x80 && b[0] < 0x8f {
				extra := append([]byte{b[0] + 1, 0xa3, 'n', 'e', 'w', 0x92, 0x01, 0xa1, 'x'}, b[1:]...)
				inputs = append(inputs, extra, append(append([]byte{b[0] + 1}, b[1:]...), 0xa3, 'n', 'e', 'w', 0xc3))
			}
			// The first field twice.
			if b[0]&0xf0 == 0x80 && b[0] > 0x80 && b[0] < 0x8f {
				_, rest, err := skip(b[1:], 0) // the key
				if err == nil {
					_, rest, err = skip(rest, 0) // its value
				}
				if err == nil {
					first := b[1 : len(b)-len(rest)]
					inputs = append(inputs, append(append([]byte{b[0] + 1}, first...), b[1:]...))
				}
			}
		}
		inputs = append(inputs, nil, []byte{0xc0}, []byte{0x80}, []byte{0x90}, []byte{0xa1, 'x'},
			// A string as bin, a uint64 as a compact int, a negative tick,
			// a float as a float32, a time as nil.
			[]byte{0x81, 0xa4, 't', 'e', 'x', 't', 0xc4, 0x02, 'h', 'i'},
			[]byte{0x81, 0xa4, 't', 'i', 'c', 'k', 0x07},
			[]byte{0x81, 0xa4, 't', 'i', 'c', 'k', 0xff},
			[]byte{0x81, 0xa2, 'h', 'z', 0xca, 0x3f, 0x80, 0, 0},
			[]byte{0x81, 0xa2, 'a', 't', 0xc0},
			[]byte{0x81, 0xa5, 'd', 'e', 'p', 't', 'h', 0x01},
			[]byte{0x81, 0xa3, 'a', 's', 'k', 0x81, 0xa5, 'd', 'e', 'p', 't', 'h', 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0},
			[]byte{0x81, 0xa3, 'a', 's', 'k', 0xc0},
			[]byte{0x81, 0xa6, 'w', 'i', 't', 'h', 'i', 'n', 0xdd, 0xff, 0xff, 0xff, 0xff},
			[]byte{0x81, 0xd9, 0x04, 't', 'e', 'x', 't', 0xa1, 'x'},
			[]byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa4, 't', 'e', 'x', 't'},
		)
		for _, in := range inputs {
			got, gerr := c.decode(in)
			want, werr := c.lib(in)
			if (gerr == nil) != (werr == nil) {
				t.Errorf("%s of % x: error %v, the reflection codec's %v", c.name, in, gerr, werr)
				continue
			}
			if gerr == nil && !sameValue(c, got, want) {
				t.Errorf("%s of % x: %#v, the reflection codec %#v", c.name, in, got, want)
			}
		}
	}
}

// A decoded value holds no byte of its input: the bus lends an event's data
// only for the handler's call.
func TestAgentDecodeCopies(t *testing.T) {
	in := AppendUserMessage(nil, &UserMessage{Text: "hello", MessageID: "m-1", Ask: &Ask{Agent: "ops", Within: []string{"a"}}})
	var m UserMessage
	if err := DecodeUserMessage(in, &m); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'z'
	}
	if m.Text != "hello" || m.MessageID != "m-1" || m.Ask.Agent != "ops" || m.Ask.Within[0] != "a" {
		t.Errorf("the decoded message changed with its input: %#v %#v", m, m.Ask)
	}
}

// FuzzAgentDecode: whatever the input, each of the agent's decoders
// accepts what the reflection codec accepts, and gives the same value.
// The kernel's doors check every length before anything decodes
// (abi.CheckMsgpack); the fuzz hands the reflection codec only such input.
func FuzzAgentDecode(f *testing.F) {
	codecs := agentCodecs()
	for _, c := range codecs {
		for _, v := range c.values {
			if b := c.append(v); len(b) < 1024 {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// A length past the input makes the reflection codec allocate it
		// before it finds the bytes missing (docs/RATIONALE.md#untrusted-msgpack):
		// such input is the fast path's alone, which must refuse it.
		_, _, werr := skip(in, 0)
		for _, c := range codecs {
			if c.decode == nil {
				continue
			}
			if werr != nil {
				if _, ok := c.fast(in); ok {
					t.Fatalf("%s: the fast path took % x: %v", c.name, in, werr)
				}
				continue
			}
			got, gerr := c.decode(in)
			want, werr := c.lib(in)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("%s of % x: error %v, the reflection codec's %v", c.name, in, gerr, werr)
			}
			if gerr == nil && !sameValue(c, got, want) {
				t.Fatalf("%s of % x: %#v, the reflection codec %#v", c.name, in, got, want)
			}
		}
	})
}

// TestAgentDecodeForgedLength: a length past the input is refused before
// anything allocates what it claims, where the reflection codec would
// allocate it first; the control, the same message with its true length,
// decodes.
func TestAgentDecodeForgedLength(t *testing.T) {
	good := AppendUserMessage(nil, &UserMessage{Text: "hi", MessageID: "m1"})
	var m UserMessage
	if err := DecodeUserMessage(good, &m); err != nil || m.Text != "hi" || m.MessageID != "m1" {
		t.Fatalf("control: %+v, %v", m, err)
	}
	// {"text": str32 claiming 1 GiB, then two bytes}: not the fast path's
	// form (it reads fixstr and str8), so it reaches the fallback.
	forged := append([]byte{0x81, 0xa4, 't', 'e', 'x', 't', 0xdb}, 0x40, 0, 0, 0, 'h', 'i')
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := DecodeUserMessage(forged, &m)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("forged length: %v, want a malformed error", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("forged length: %d bytes allocated before the refusal", grew)
	}
}
