package abi

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The hand-written Request and Response codecs must agree with the
// reflection codec over the same tags, both ways.
func TestRequestResponseMatchReflectionCodec(t *testing.T) {
	params, _ := msgpack.Marshal(map[string]any{"pattern": "kairo.>", "fromSeq": 7})
	result, _ := msgpack.Marshal(map[string]any{"seq": 12})
	reqs := []Request{
		{ID: 1, Method: "kernel.ping"},
		{ID: 1 << 40, Method: "events.subscribe", Params: params},
		{ID: 300, Method: strings.Repeat("m", 40)},
	}
	for _, r := range reqs {
		mine := AppendRequest(nil, &r)
		var viaLib Request
		if err := msgpack.Unmarshal(mine, &viaLib); err != nil || !reflect.DeepEqual(viaLib, r) {
			t.Errorf("AppendRequest(%+v) decodes with msgpack to %+v (%v)", r, viaLib, err)
		}
		lib, _ := msgpack.Marshal(&r)
		var viaMine Request
		if err := DecodeRequest(lib, &viaMine); err != nil || !reflect.DeepEqual(viaMine, r) {
			t.Errorf("DecodeRequest(msgpack of %+v) = %+v (%v)", r, viaMine, err)
		}
	}
	resps := []Response{
		{ID: 2},
		{ID: 3, Result: result},
		{ID: 4, Error: &Error{Code: CodeInvalidParams, Message: `param "fromSeq": want uint64`}},
	}
	for _, r := range resps {
		mine := AppendResponse(nil, &r)
		var viaLib Response
		if err := msgpack.Unmarshal(mine, &viaLib); err != nil || !reflect.DeepEqual(viaLib, r) {
			t.Errorf("AppendResponse(%+v) decodes with msgpack to %+v (%v)", r, viaLib, err)
		}
		lib, _ := msgpack.Marshal(&r)
		var viaMine Response
		if err := DecodeResponse(lib, &viaMine); err != nil || !reflect.DeepEqual(viaMine, r) {
			t.Errorf("DecodeResponse(msgpack of %+v) = %+v (%v)", r, viaMine, err)
		}
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"not a map", []byte{0x91, 0x01}, "want a map"},
		{"method not a string", []byte{0x82, 0xa2, 'i', 'd', 0x07, 0xa6, 'm', 'e', 't', 'h', 'o', 'd', 0xc3}, `field "method": want a string`},
		{"negative id", []byte{0x81, 0xa2, 'i', 'd', 0xff}, `field "id"`},
		{"forged length", []byte{0x81, 0xa6, 'p', 'a', 'r', 'a', 'm', 's', 0xdb, 0x30, 0x30, 0x30, 0x30}, "unexpected end of data"},
		{"trailing bytes", append(AppendRequest(nil, &Request{ID: 1, Method: "m"}), 0x00), "after the map"},
	} {
		var r Request
		err := DecodeRequest(tc.in, &r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	if err := CheckMsgpack([]byte{0xdb, 0x30, 0x30, 0x30, 0x30}); err == nil {
		t.Error("CheckMsgpack accepted a string longer than its input")
	}
	if err := CheckMsgpack(bytes.Repeat([]byte{0x91}, 100)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("CheckMsgpack on 100 nested arrays: %v", err)
	}
	if err := CheckMsgpack(AppendRequest(nil, &Request{ID: 1, Method: "m"})); err != nil {
		t.Errorf("CheckMsgpack on a good request: %v", err)
	}
}

func TestStreamChunkMatchesReflectionCodec(t *testing.T) {
	for _, c := range []StreamChunk{
		{ProcessID: "p1", Stream: "stdout", Seq: 1, Encoding: "utf8", Chunk: []byte("hello\n")},
		{ProcessID: "p2", Stream: "stderr", Seq: 70000, Encoding: "binary", Chunk: bytes.Repeat([]byte{0xff}, 70000), Truncated: true, CorrelationID: "run-1"},
	} {
		mine := AppendStreamChunk(nil, &c)
		var viaLib StreamChunk
		if err := msgpack.Unmarshal(mine, &viaLib); err != nil || !reflect.DeepEqual(viaLib, c) {
			t.Errorf("AppendStreamChunk(%s) decodes with msgpack to a different chunk (%v)", c.ProcessID, err)
		}
		lib, _ := msgpack.Marshal(&c)
		var viaMine StreamChunk
		if err := DecodeStreamChunk(lib, &viaMine); err != nil || !reflect.DeepEqual(viaMine, c) {
			t.Errorf("DecodeStreamChunk(msgpack of %s) differs (%v)", c.ProcessID, err)
		}
	}
}
