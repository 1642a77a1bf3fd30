package ipc

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// FuzzFrameDecode feeds arbitrary bytes to the server's read path: frame
// reader, then Request decoding. It must never panic, never return a payload
// over the limit, and a frame it accepts must re-encode to the same bytes.
func FuzzFrameDecode(f *testing.F) {
	good := getFrameBuf()
	good.addRaw(abi.PacketRequest, func(p []byte) []byte {
		return abi.AppendRequest(p, &abi.Request{ID: 1, Method: "kernel.ping"})
	})
	f.Add(bytes.Clone(good.b.Bytes()))
	f.Add([]byte{'K', 'R', 1, 1, 0, 0, 0, 0})
	f.Add([]byte{'K', 'R', 1, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{'K', 'R', 2, 1, 0, 0, 0, 1, 0xc0})
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add([]byte{'K', 'R', 1, 1, 0, 0, 0, 3, 0x81, 0xa2, 'i'})
	const max = 1 << 12
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := newFrameReader(bytes.NewReader(in), max)
		for {
			typ, p, err := fr.next()
			if err != nil {
				var fe *abi.FrameError
				if !errors.Is(err, io.EOF) && !errors.As(err, &fe) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				return
			}
			if len(p) > max || !typ.Valid() {
				t.Fatalf("accepted a %d-byte payload of type %v", len(p), typ)
			}
			// As the server does.
			var req abi.Request
			if err := abi.DecodeRequest(bytes.Clone(p), &req); err != nil {
				if abi.CheckMsgpack(p) == nil {
					salvageID(p) // must not panic either
				}
				continue
			}
			out := abi.AppendRequest(nil, &req)
			var re abi.Request
			if err := abi.DecodeRequest(out, &re); err != nil || re.ID != req.ID || re.Method != req.Method || !bytes.Equal(re.Params, req.Params) {
				t.Fatalf("round trip %+v → %+v (%v)", req, re, err)
			}
		}
	})
}
