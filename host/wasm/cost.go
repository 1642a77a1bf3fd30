package wasm

import (
	"encoding/binary"

	"github.com/kairo-os/kairo/abi"
)

// What a plugin costs the host, and the caps that bound it. Every byte the
// host copies out of a guest in a batch (call arguments, published events,
// the output) is charged to the plugin against InstanceConfig.MaxBatchBytes; every
// list the host would allocate for a reply is counted against
// InstanceConfig.MaxActions before it is. Going past either stops the instance
// with ReasonLimit, and the manager restarts it with backoff. The caps that
// refuse without stopping (calls and publishes per batch, log lines) are
// counted and reported once a batch, in Output.Throttled.

// throttleCounts are the attempts of one batch past the refusing caps.
type throttleCounts struct {
	calls, publishes, logLines, logBytes int
}

func (t *throttleCounts) caps(o *InstanceConfig) []abi.PluginCap {
	var cs []abi.PluginCap
	for _, c := range [...]abi.PluginCap{
		{Cap: "calls", Limit: o.MaxCalls, Over: t.calls},
		{Cap: "publishes", Limit: o.MaxPublishes, Over: t.publishes},
		{Cap: "log lines", Limit: maxLogLines, Over: t.logLines},
		{Cap: "log bytes", Limit: maxLogLen, Over: t.logBytes},
	} {
		if c.Over > 0 {
			cs = append(cs, c)
		}
	}
	return cs
}

// charge counts n bytes the host copies for the plugin in this batch and
// returns a *CapError once they pass MaxBatchBytes.
func (p *Plugin) charge(what string, n int) error {
	p.hostBytes += n
	if p.hostBytes > p.opts.MaxBatchBytes {
		return &CapError{What: "bytes copied out of the guest in one batch, at " + what, Got: int64(p.hostBytes), Max: int64(p.opts.MaxBatchBytes), Unit: "bytes", Cap: "InstanceConfig.MaxBatchBytes"}
	}
	return nil
}

// overCap stops the guest from inside a host function, as read does for a
// bad range: callRaw finds err in importErr and reports ReasonLimit.
func (p *Plugin) overCap(err error) {
	p.importErr = err
	panic(err)
}

// checkReplyCounts refuses a reply with a list of more than max entries
// before the decoder allocates it: a 4 MiB reply of empty actions is four
// million of them, some 370 MB once decoded. A malformed reply passes, for
// the decoder to report.
func checkReplyCounts(b []byte, max int) error {
	if len(b) <= max {
		// Each entry takes a byte at least, and the decoder checks a
		// count against the bytes left before it allocates.
		return nil
	}
	n, b, ok := mpMapLen(b)
	if !ok {
		return nil
	}
	for range n {
		var key []byte
		if key, b, ok = mpStr(b); !ok {
			return nil
		}
		switch string(key) {
		case "actions", "toolResults", "serviceResults":
			if k, _, ok := mpArrayLen(b); ok && k > max {
				return &CapError{What: "reply " + string(key), Got: int64(k), Max: int64(max), Unit: "entries", Cap: "InstanceConfig.MaxActions"}
			}
		}
		if b, ok = mpSkip(b, 0); !ok {
			return nil
		}
	}
	return nil
}

func mpMapLen(b []byte) (int, []byte, bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	switch c := b[0]; {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), b[1:], true
	case c == 0xde && len(b) >= 3:
		return int(binary.BigEndian.Uint16(b[1:])), b[3:], true
	case c == 0xdf && len(b) >= 5:
		return int(binary.BigEndian.Uint32(b[1:])), b[5:], true
	}
	return 0, nil, false
}

func mpArrayLen(b []byte) (int, []byte, bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	switch c := b[0]; {
	case c&0xf0 == 0x90:
		return int(c & 0x0f), b[1:], true
	case c == 0xdc && len(b) >= 3:
		return int(binary.BigEndian.Uint16(b[1:])), b[3:], true
	case c == 0xdd && len(b) >= 5:
		return int(binary.BigEndian.Uint32(b[1:])), b[5:], true
	}
	return 0, nil, false
}

func mpStr(b []byte) ([]byte, []byte, bool) {
	if len(b) == 0 {
		return nil, nil, false
	}
	var n, h int
	switch c := b[0]; {
	case c&0xe0 == 0xa0:
		n, h = int(c&0x1f), 1
	case c == 0xd9 && len(b) >= 2:
		n, h = int(b[1]), 2
	case c == 0xda && len(b) >= 3:
		n, h = int(binary.BigEndian.Uint16(b[1:])), 3
	case c == 0xdb && len(b) >= 5:
		n, h = int(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return nil, nil, false
	}
	if len(b)-h < n {
		return nil, nil, false
	}
	return b[h : h+n], b[h+n:], true
}

// mpSkip returns what follows the MsgPack value at the start of b, without
// allocating; ok is false for a malformed or too deeply nested value.
func mpSkip(b []byte, depth int) (rest []byte, ok bool) {
	if len(b) == 0 || depth > 64 {
		return nil, false
	}
	// Each value is a header of h bytes, then a body of n bytes or of
	// items values.
	c := b[0]
	h, n, items := 1, 0, 0
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
	case c&0xf0 == 0x80:
		items = 2 * int(c&0x0f)
	case c&0xf0 == 0x90:
		items = int(c & 0x0f)
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
	default:
		var w int // bytes of a big-endian length after the code
		switch c {
		case 0xcc, 0xd0:
			n = 1
		case 0xcd, 0xd1:
			n = 2
		case 0xca, 0xce, 0xd2:
			n = 4
		case 0xcb, 0xcf, 0xd3:
			n = 8
		case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: a type byte, then 1 to 16
			h, n = 2, 1<<(c-0xd4)
		case 0xc4, 0xd9:
			w = 1
		case 0xc5, 0xda, 0xdc, 0xde:
			w = 2
		case 0xc6, 0xdb, 0xdd, 0xdf:
			w = 4
		case 0xc7:
			h, w = 1, 1 // plus the type byte, below
		case 0xc8:
			w = 2
		case 0xc9:
			w = 4
		default:
			return nil, false
		}
		if w > 0 {
			if len(b) < 1+w {
				return nil, false
			}
			var l int
			switch w {
			case 1:
				l = int(b[1])
			case 2:
				l = int(binary.BigEndian.Uint16(b[1:]))
			default:
				l = int(binary.BigEndian.Uint32(b[1:]))
			}
			h = 1 + w
			switch c {
			case 0xc7, 0xc8, 0xc9:
				h, n = h+1, l // the ext's type byte
			case 0xdc, 0xdd:
				items = l
			case 0xde, 0xdf:
				items = 2 * l
			default:
				n = l
			}
		}
	}
	if len(b) < h || len(b)-h < n {
		return nil, false
	}
	b = b[h+n:]
	for range items {
		if b, ok = mpSkip(b, depth+1); !ok {
			return nil, false
		}
	}
	return b, true
}
