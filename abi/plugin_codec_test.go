package abi

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func pluginBatches(t testing.TB) []Batch {
	data := mustMarshal(t, map[string]any{"text": "hi"})
	at := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	many := make([]Event, 17) // past a fixarray
	for i := range many {
		many[i] = Event{ID: "e", Type: "t", Time: at}
	}
	return []Batch{
		{},
		{Time: at},
		{Time: time.Unix(1<<35, 1), Tick: 1 << 40},
		{Time: at, Tick: 7, Events: []Event{
			{ID: "ev-1", Type: "kairo.user.message", Time: at, Data: data, CorrelationID: "run-1"},
			{ID: "ev-2", Type: "kairo.tick", Source: "kernel", Time: at, CausationID: "ev-1", Seq: 9},
		}},
		{Time: at, Events: many},
		{Time: at, ToolCalls: []ToolCall{
			{ID: "a1", Name: "search"},
			{ID: "a2", Name: "fetch", Arguments: `{"url":"x"}`, CorrelationID: "run-2"},
		}},
		{Time: at, CallResults: []CallResult{
			{Token: 1, Result: data},
			{Token: -5, Error: &Error{Code: CodeInvalidParams, Message: "no"}},
			{Token: 1 << 50},
			{Token: -1 << 40},
		}},
		{Time: at, ServiceCalls: []ServiceCall{
			{ID: 3, Method: "echo.upper", Args: data, From: "other"},
			{ID: 1 << 33, Method: "echo.ping"},
		}},
		{Time: at, Tick: 9, Agent: &AgentInput{Agent: "default", Hz: 2.5, Memory: "m", RunLoops: []RunLoopView{
			{ID: "run-1", Goal: "build", StartedAt: at, Iterations: 2, Messages: []string{"run make"},
				Actions: []ActionView{{ID: "a1", Type: ActionToolCall, Tool: "process.spawn", Args: `{"argv":["make"]}`, Status: StatusInProgress, StartedAt: at}}},
		}}},
	}
}

func pluginReplies(t testing.TB) []Reply {
	data := mustMarshal(t, map[string]any{"text": strings.Repeat("y", 300)})
	return []Reply{
		{},
		{Error: "batch: broken"},
		{Thought: "think", Actions: []Action{
			{Type: ActionNoop},
			{ID: "a1", Type: ActionSay, CorrelationID: "run-1", Data: data},
			{Type: ActionQuery, CausationID: "ev-9", Data: data},
		}},
		{ToolResults: []ToolResult{
			{ID: "a2", Content: ""},
			{ID: "a3", Content: strings.Repeat("z", 70000), IsError: true},
		}},
		{ServiceResults: []CallResult{
			{Token: 3, Result: data},
			{Token: 4, Error: &Error{Code: CodeNotFound, Message: "no such thing"}},
		}},
	}
}

// compact is the reflection codec's encoding with compact ints, which the
// hand-written codecs write.
func compact(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The hand-written Batch and Reply codecs and the reflection codec over the
// same tags must be interchangeable: same bytes out, same values in.
func TestPluginCodecMatchesReflectionCodec(t *testing.T) {
	for i, b := range pluginBatches(t) {
		mine := AppendBatch(nil, &b)
		if lib := compact(t, &b); !bytes.Equal(mine, lib) {
			t.Errorf("batch %d: encodings differ:\n mine % x\n lib  % x", i, mine, lib)
		}
		var viaLib Batch
		if err := msgpack.Unmarshal(mine, &viaLib); err != nil {
			t.Errorf("batch %d: msgpack rejects AppendBatch's bytes: %v", i, err)
		}
		var viaMine Batch
		if err := DecodeBatch(mustMarshal(t, &b), &viaMine); err != nil {
			t.Fatalf("batch %d: DecodeBatch of msgpack's bytes: %v", i, err)
		}
		if !viaMine.Time.Equal(b.Time) {
			t.Errorf("batch %d: time %v, want %v", i, viaMine.Time, b.Time)
		}
		if again := AppendBatch(nil, &viaMine); !bytes.Equal(again, mine) {
			t.Errorf("batch %d: decoded batch encodes differently:\n got  % x\n want % x", i, again, mine)
		}
		if again := compact(t, &viaLib); !bytes.Equal(again, mine) {
			t.Errorf("batch %d: msgpack's decoding encodes differently", i)
		}
	}
	for i, r := range pluginReplies(t) {
		mine := AppendReply(nil, &r)
		if lib := compact(t, &r); !bytes.Equal(mine, lib) {
			t.Errorf("reply %d: encodings differ:\n mine % x\n lib  % x", i, mine, lib)
		}
		var viaLib Reply
		if err := msgpack.Unmarshal(mine, &viaLib); err != nil || !reflect.DeepEqual(viaLib, r) {
			t.Errorf("reply %d: msgpack decodes AppendReply's bytes to %+v (%v)", i, viaLib, err)
		}
		var viaMine Reply
		if err := DecodeReply(mustMarshal(t, &r), &viaMine); err != nil || !reflect.DeepEqual(viaMine, r) {
			t.Errorf("reply %d: DecodeReply of msgpack's bytes = %+v (%v)", i, viaMine, err)
		}
	}
}

func TestPluginDecodeRejects(t *testing.T) {
	good := AppendReply(nil, &Reply{Actions: []Action{{Type: ActionNoop}}})
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"not a map", []byte{0x91, 0x01}, "want a map"},
		{"actions not an array", []byte{0x81, 0xa7, 'a', 'c', 't', 'i', 'o', 'n', 's', 0x01}, `field "actions": want an array`},
		{"forged array length", []byte{0x81, 0xa7, 'a', 'c', 't', 'i', 'o', 'n', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x80}, "unexpected end of data"},
		{"bad element", []byte{0x81, 0xa7, 'a', 'c', 't', 'i', 'o', 'n', 's', 0x91, 0x81, 0xa4, 't', 'y', 'p', 'e', 0x01}, "element 0"},
		{"trailing bytes", append(good, 0x00), "bytes after its MsgPack value"},
	} {
		var r Reply
		if err := DecodeReply(tc.in, &r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	var b Batch
	if err := DecodeBatch([]byte{0x81, 0xab, 'c', 'a', 'l', 'l', 'R', 'e', 's', 'u', 'l', 't', 's', 0x91, 0x81, 0xa5, 't', 'o', 'k', 'e', 'n', 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0}, &b); err == nil || !strings.Contains(err.Error(), "overflows int64") {
		t.Errorf("token past int64: %v", err)
	}
}

// FuzzPluginDecode feeds the same bytes to DecodeBatch and DecodeReply. What
// either accepts must encode back to bytes it decodes to the same value, and
// which the reflection codec reads to that value too.
func FuzzPluginDecode(f *testing.F) {
	for _, b := range pluginBatches(f) {
		f.Add(AppendBatch(nil, &b))
	}
	for _, r := range pluginReplies(f) {
		f.Add(AppendReply(nil, &r))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var b Batch
		if err := DecodeBatch(in, &b); err == nil {
			enc := AppendBatch(nil, &b)
			var again Batch
			if err := DecodeBatch(enc, &again); err != nil {
				t.Fatalf("re-encoded batch % x does not decode: %v", enc, err)
			}
			if enc2 := AppendBatch(nil, &again); !bytes.Equal(enc, enc2) {
				t.Fatalf("re-encoding changed the batch:\n % x\n % x", enc, enc2)
			}
			var lib Batch
			if err := msgpack.Unmarshal(enc, &lib); err != nil {
				t.Fatalf("reflection codec rejects % x: %v", enc, err)
			}
			if enc2 := compact(t, &lib); !bytes.Equal(enc, enc2) {
				t.Fatalf("reflection codec reads % x differently: % x", enc, enc2)
			}
		}
		var r Reply
		if err := DecodeReply(in, &r); err == nil {
			enc := AppendReply(nil, &r)
			var again Reply
			if err := DecodeReply(enc, &again); err != nil {
				t.Fatalf("re-encoded reply % x does not decode: %v", enc, err)
			}
			if enc2 := AppendReply(nil, &again); !bytes.Equal(enc, enc2) {
				t.Fatalf("re-encoding changed the reply:\n % x\n % x", enc, enc2)
			}
			var lib Reply
			if err := msgpack.Unmarshal(enc, &lib); err != nil {
				t.Fatalf("reflection codec rejects % x: %v", enc, err)
			}
			if enc2 := compact(t, &lib); !bytes.Equal(enc, enc2) {
				t.Fatalf("reflection codec reads % x differently: % x", enc, enc2)
			}
		}
	})
}

// A batch whose agent input the reflection codec cannot take (nil where a
// struct goes) is an error, never a panic inside the guest.
func TestDecodeBatchMalformedAgent(t *testing.T) {
	in := mustMarshal(t, map[string]any{"time": time.Unix(1, 0), "agent": map[string]any{
		"runLoops": []any{map[string]any{"id": "r", "startedAt": nil, "actions": []any{map[string]any{"startedAt": nil}}}},
	}})
	var b Batch
	if err := DecodeBatch(in, &b); err == nil || !strings.Contains(err.Error(), "malformed *abi.AgentInput") {
		t.Fatalf("err = %v; want the malformed agent input named", err)
	}
	in = mustMarshal(t, map[string]any{"time": time.Unix(1, 0), "agent": map[string]any{"runLoops": "not a list"}})
	if err := DecodeBatch(in, &b); err == nil {
		t.Fatal("a malformed agent input decoded")
	}
}
