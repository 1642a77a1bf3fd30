package abi

import "fmt"

// Hand-written codecs of the IPC packets, with the keys of their tags. The
// decoders check every length against their input, so they are safe on
// untrusted bytes; what they return aliases that input.

// DecodeEventPacket decodes an EVENT packet's payload.
func DecodeEventPacket(b []byte, p *EventPacket) error {
	*p = EventPacket{}
	_, err := readMap(b, "event packet", func(key string, b []byte) (rest []byte, err error) {
		switch key {
		case "sub":
			p.Subscription, rest, err = readUint(b)
		case "event":
			rest, err = DecodeEvent(b, &p.Event)
		default:
			_, rest, err = skip(b, 0)
		}
		return rest, err
	})
	return err
}

// DecodeRequest decodes a REQUEST payload.
func DecodeRequest(b []byte, r *Request) error {
	*r = Request{}
	rest, err := readMap(b, "request", func(key string, b []byte) (rest []byte, err error) {
		switch key {
		case "id":
			r.ID, rest, err = readUint(b)
		case "method":
			r.Method, rest, err = readStr(b)
		case "params":
			r.Params, rest, err = readRaw(b)
		default:
			_, rest, err = skip(b, 0)
		}
		return rest, err
	})
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("request: %d bytes after the map", len(rest))
	}
	return err
}

// DecodeResponse decodes a RESPONSE payload.
func DecodeResponse(b []byte, r *Response) error {
	*r = Response{}
	_, err := readMap(b, "response", func(key string, b []byte) (rest []byte, err error) {
		switch key {
		case "id":
			r.ID, rest, err = readUint(b)
		case "result":
			r.Result, rest, err = readRaw(b)
		case "error":
			if len(b) > 0 && b[0] == 0xc0 {
				return b[1:], nil
			}
			r.Error = new(Error)
			rest, err = readMap(b, "error", func(key string, b []byte) (rest []byte, err error) {
				switch key {
				case "code":
					r.Error.Code, rest, err = readStr(b)
				case "message":
					r.Error.Message, rest, err = readStr(b)
				default:
					_, rest, err = skip(b, 0)
				}
				return rest, err
			})
		default:
			_, rest, err = skip(b, 0)
		}
		return rest, err
	})
	return err
}

// AppendRequest appends r's MsgPack encoding to dst, with the keys of the
// [Request] tags.
func AppendRequest(dst []byte, r *Request) []byte {
	n := 2
	if len(r.Params) > 0 {
		n++
	}
	dst = appendUint(appendStr(append(dst, 0x80|byte(n)), "id"), r.ID)
	dst = appendStr(appendStr(dst, "method"), r.Method)
	if len(r.Params) > 0 {
		dst = append(appendStr(dst, "params"), r.Params...)
	}
	return dst
}

// AppendResponse appends r's MsgPack encoding to dst, with the keys of the
// [Response] tags.
func AppendResponse(dst []byte, r *Response) []byte {
	n := 1
	if len(r.Result) > 0 {
		n++
	}
	if r.Error != nil {
		n++
	}
	dst = appendUint(appendStr(append(dst, 0x80|byte(n)), "id"), r.ID)
	if len(r.Result) > 0 {
		dst = append(appendStr(dst, "result"), r.Result...)
	}
	if r.Error != nil {
		dst = appendError(appendStr(dst, "error"), r.Error)
	}
	return dst
}

// appendError appends e as the map {code, message}.
func appendError(dst []byte, e *Error) []byte {
	dst = appendStr(appendStr(append(dst, 0x82), "code"), e.Code)
	return appendStr(appendStr(dst, "message"), e.Message)
}

// AppendStreamChunk appends c's MsgPack encoding to dst, with the keys of
// the [StreamChunk] tags: the output hot path.
func AppendStreamChunk(dst []byte, c *StreamChunk) []byte {
	return append(AppendStreamChunkHead(dst, c), c.Chunk...)
}

// AppendStreamChunkHead appends all of c's encoding but the output bytes,
// which come last: a writer can send them from where they are (writev)
// instead of copying them behind the head.
func AppendStreamChunkHead(dst []byte, c *StreamChunk) []byte {
	return AppendStreamChunkHeadLen(dst, c, len(c.Chunk))
}

// AppendStreamChunkHeadLen is [AppendStreamChunkHead] for output of size
// bytes that c does not hold: the kernel sends them from elsewhere (a pipe
// spliced to the socket) right after the head.
func AppendStreamChunkHeadLen(dst []byte, c *StreamChunk, size int) []byte {
	n := 5
	if c.Truncated {
		n++
	}
	if c.CorrelationID != "" {
		n++
	}
	dst = append(dst, 0x80|byte(n))
	dst = appendStr(appendStr(dst, "processId"), c.ProcessID)
	dst = appendStr(appendStr(dst, "stream"), c.Stream)
	dst = appendUint(appendStr(dst, "seq"), c.Seq)
	dst = appendStr(appendStr(dst, "encoding"), c.Encoding)
	if c.Truncated {
		dst = append(appendStr(dst, "truncated"), 0xc3)
	}
	if c.CorrelationID != "" {
		dst = appendStr(appendStr(dst, "correlationId"), c.CorrelationID)
	}
	return appendBinHeader(appendStr(dst, "chunk"), size)
}

// DecodeStreamChunk decodes a STREAM_CHUNK payload.
func DecodeStreamChunk(b []byte, c *StreamChunk) error {
	*c = StreamChunk{}
	_, err := readMap(b, "stream chunk", func(key string, b []byte) (rest []byte, err error) {
		switch key {
		case "processId":
			c.ProcessID, rest, err = readStr(b)
		case "stream":
			c.Stream, rest, err = readStr(b)
		case "seq":
			c.Seq, rest, err = readUint(b)
		case "encoding":
			c.Encoding, rest, err = readStr(b)
		case "chunk":
			c.Chunk, rest, err = readBin(b)
		case "truncated":
			c.Truncated, rest, err = readBool(b)
		case "correlationId":
			c.CorrelationID, rest, err = readStr(b)
		default:
			_, rest, err = skip(b, 0)
		}
		return rest, err
	})
	return err
}

// PeekRequestID reads the id of a REQUEST payload from its first bytes,
// which may be cut short: a request refused before it was read whole can
// still be answered by its id. ok is false when the id is not among them.
func PeekRequestID(b []byte) (id uint64, ok bool) {
	n, b, err := readMapLen(b)
	if err != nil {
		return 0, false
	}
	for i := 0; i < n; i++ {
		var key string
		if key, b, err = readStr(b); err != nil {
			return 0, false
		}
		if key == "id" {
			if id, _, err = readUint(b); err != nil {
				return 0, false
			}
			return id, true
		}
		if _, b, err = skip(b, 0); err != nil {
			return 0, false
		}
	}
	return 0, false
}
