package abi

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Bounds on what a client sends that the kernel keeps: ids, sources and the
// lists a spawn carries. A value over its bound is refused with an error
// that names the field and the bound, before the kernel stores it, and, for
// lists, before it allocates their entries: a forged count of a million nil
// entries costs a reflection decoder sixteen bytes each.
const (
	// MaxIDLen bounds ids a client names: an event's id, correlation and
	// causation ids, process ids. The kernel's own are 36 bytes.
	MaxIDLen = 256
	// MaxSourceLen bounds an event's source.
	MaxSourceLen = 256
	// MaxSubjectLen bounds subjects and subscription patterns (the bus
	// checks them).
	MaxSubjectLen = 256
	// MaxPathLen bounds a folder or manifest path, as PATH_MAX does.
	MaxPathLen = 4096
	// MaxTextLen bounds free text the kernel keeps, such as a cancel's
	// reason.
	MaxTextLen = 1024
	// MaxListLen bounds the entries of a spawn's argv, env and params.
	MaxListLen = 4096
	// MaxListBytes bounds the bytes of the strings of one such list.
	MaxListBytes = 1 << 20
)

// LimitError is a value over its bound.
type LimitError struct {
	Field string // the wire name, e.g. "event.source"
	Got   int
	Max   int
	What  string // "bytes" or "entries"
	Bound string // the constant, e.g. "MaxSourceLen"
}

// Error names the field, its size, the bound and the constant that sets it.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s has %d %s, over its bound of %d (abi.%s)", e.Field, e.Got, e.What, e.Max, e.Bound)
}

// CheckLen refuses s when it is over max bytes; bound names the constant.
func CheckLen(field, s string, max int, bound string) error {
	if len(s) > max {
		return &LimitError{Field: field, Got: len(s), Max: max, What: "bytes", Bound: bound}
	}
	return nil
}

// CheckEventLimits refuses an event whose id, source, correlation or
// causation id or host is over its bound. The bus checks the subject.
func CheckEventLimits(ev *Event) error {
	// Every publish passes here: compare first, name the field only for
	// an event that fails.
	if len(ev.ID) <= MaxIDLen && len(ev.Source) <= MaxSourceLen && len(ev.CorrelationID) <= MaxIDLen &&
		len(ev.CausationID) <= MaxIDLen && len(ev.Host) <= MaxIDLen {
		return nil
	}
	for _, c := range [...]struct {
		field, s string
		max      int
		bound    string
	}{
		{"event.id", ev.ID, MaxIDLen, "MaxIDLen"},
		{"event.source", ev.Source, MaxSourceLen, "MaxSourceLen"},
		{"event.correlationId", ev.CorrelationID, MaxIDLen, "MaxIDLen"},
		{"event.causationId", ev.CausationID, MaxIDLen, "MaxIDLen"},
		{"event.host", ev.Host, MaxIDLen, "MaxIDLen"},
	} {
		if err := CheckLen(c.field, c.s, c.max, c.bound); err != nil {
			return err
		}
	}
	return nil
}

// StringList is a list of strings from a client (a spawn's argv and env),
// decoded within [MaxListLen] entries and [MaxListBytes] bytes: the count is
// checked before anything is allocated, the bytes while decoding.
type StringList []string

var _ msgpack.CustomDecoder = (*StringList)(nil)

// DecodeMsgpack reads a MsgPack array of strings (nil as an empty list).
func (l *StringList) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 {
		*l = nil
		return nil
	}
	if n > MaxListLen {
		return &LimitError{Field: "the list", Got: n, Max: MaxListLen, What: "entries", Bound: "MaxListLen"}
	}
	out := make([]string, 0, n)
	size := 0
	for i := 0; i < n; i++ {
		s, err := dec.DecodeString()
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if size += len(s); size > MaxListBytes {
			return &LimitError{Field: "the list", Got: size, Max: MaxListBytes, What: "bytes", Bound: "MaxListBytes"}
		}
		out = append(out, s)
	}
	*l = out
	return nil
}

// StringMap is a map of strings from a client (a skill's params), decoded
// within [MaxListLen] entries and [MaxListBytes] bytes like [StringList].
type StringMap map[string]string

var _ msgpack.CustomDecoder = (*StringMap)(nil)

// DecodeMsgpack reads a MsgPack map of strings to strings (nil as no map).
func (m *StringMap) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	if n < 0 {
		*m = nil
		return nil
	}
	if n > MaxListLen {
		return &LimitError{Field: "the map", Got: n, Max: MaxListLen, What: "entries", Bound: "MaxListLen"}
	}
	out := make(map[string]string, min(n, 64))
	size := 0
	for i := 0; i < n; i++ {
		k, err := dec.DecodeString()
		if err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
		v, err := dec.DecodeString()
		if err != nil {
			return fmt.Errorf("value of %q: %w", k, err)
		}
		if size += len(k) + len(v); size > MaxListBytes {
			return &LimitError{Field: "the map", Got: size, Max: MaxListBytes, What: "bytes", Bound: "MaxListBytes"}
		}
		out[k] = v
	}
	*m = out
	return nil
}

// lenCheck is one string field and its bound.
type lenCheck struct {
	field, s string
	max      int
	bound    string
}

func checkLens(cs ...lenCheck) error {
	for _, c := range cs {
		if err := CheckLen(c.field, c.s, c.max, c.bound); err != nil {
			return err
		}
	}
	return nil
}

// The params below decode by reflection, then have their strings checked:
// a string costs what its bytes in the request cost, so checking it after
// decoding is enough; lists are bounded by StringList and StringMap.

// DecodeMsgpack decodes the params and checks their bounds.
func (p *SpawnParams) DecodeMsgpack(dec *msgpack.Decoder) error {
	type plain SpawnParams
	if err := dec.Decode((*plain)(p)); err != nil {
		return err
	}
	return checkLens(
		lenCheck{"cwd", p.Cwd, MaxPathLen, "MaxPathLen"},
		lenCheck{"manifest", p.Manifest, MaxPathLen, "MaxPathLen"},
		lenCheck{"skill", p.Skill, MaxIDLen, "MaxIDLen"},
		lenCheck{"mode", p.Mode, MaxIDLen, "MaxIDLen"},
		lenCheck{"encoding", p.Encoding, MaxIDLen, "MaxIDLen"},
		lenCheck{"correlationId", p.CorrelationID, MaxIDLen, "MaxIDLen"},
		lenCheck{"causationId", p.CausationID, MaxIDLen, "MaxIDLen"},
	)
}

// DecodeMsgpack decodes the params and checks their bounds.
func (p *ProcessRef) DecodeMsgpack(dec *msgpack.Decoder) error {
	type plain ProcessRef
	if err := dec.Decode((*plain)(p)); err != nil {
		return err
	}
	return CheckLen("processId", p.ProcessID, MaxIDLen, "MaxIDLen")
}

// DecodeMsgpack decodes the params and checks their bounds.
func (p *StdinParams) DecodeMsgpack(dec *msgpack.Decoder) error {
	type plain StdinParams
	if err := dec.Decode((*plain)(p)); err != nil {
		return err
	}
	return checkLens(
		lenCheck{"processId", p.ProcessID, MaxIDLen, "MaxIDLen"},
		lenCheck{"encoding", p.Encoding, MaxIDLen, "MaxIDLen"},
	)
}

// DecodeMsgpack decodes the params and checks their bounds.
func (p *WaitParams) DecodeMsgpack(dec *msgpack.Decoder) error {
	type plain WaitParams
	if err := dec.Decode((*plain)(p)); err != nil {
		return err
	}
	return CheckLen("processId", p.ProcessID, MaxIDLen, "MaxIDLen")
}

// DecodeMsgpack decodes the params and checks their bounds.
func (p *SignalParams) DecodeMsgpack(dec *msgpack.Decoder) error {
	type plain SignalParams
	if err := dec.Decode((*plain)(p)); err != nil {
		return err
	}
	return checkLens(
		lenCheck{"processId", p.ProcessID, MaxIDLen, "MaxIDLen"},
		lenCheck{"signal", p.Signal, MaxIDLen, "MaxIDLen"},
	)
}

// DecodeMsgpack decodes the params and checks their bounds.
func (p *ResizeParams) DecodeMsgpack(dec *msgpack.Decoder) error {
	type plain ResizeParams
	if err := dec.Decode((*plain)(p)); err != nil {
		return err
	}
	return CheckLen("processId", p.ProcessID, MaxIDLen, "MaxIDLen")
}

// DecodeMsgpack decodes the params and checks their bounds.
func (p *CancelParams) DecodeMsgpack(dec *msgpack.Decoder) error {
	type plain CancelParams
	if err := dec.Decode((*plain)(p)); err != nil {
		return err
	}
	return checkLens(
		lenCheck{"correlationId", p.CorrelationID, MaxIDLen, "MaxIDLen"},
		lenCheck{"reason", p.Reason, MaxTextLen, "MaxTextLen"},
	)
}
