package bench

import "github.com/vmihailenco/msgpack/v5"

// payload256 is a MsgPack bin of 256 bytes, the payload size of the targets.
func payload256() []byte {
	p, err := msgpack.Marshal(make([]byte, 256))
	if err != nil {
		panic(err)
	}
	return p
}
