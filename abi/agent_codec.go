package abi

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Hand-written codecs of the agent's own events' data: the user message it
// routes and the run loop's start, actions, end and tick record, each
// encoded once and decoded several times a message on the agent's path,
// where msgpack's reflection was most of the runtime's CPU
// (docs/RATIONALE.md#the-agents-events-have-hand-written-codecs).
//
// The Append functions write the bytes msgpack.Marshal writes for the same
// value: keys in field order, empty omitempty fields left out, ints in
// their smallest form, uint64s in nine bytes. The Decode functions read
// the form those write, and anything else (another form of a value, a key
// they do not know, a key twice, bytes after the value) they hand to
// msgpack.Unmarshal, so what they accept, reject and skip stays the
// reflection codec's (a panic of it an error); agent_codec_test.go and
// FuzzAgentDecode hold both to that. They decode into a zero value, and
// keep no byte of their input.

// AppendUserMessage appends m's MsgPack encoding to dst.
func AppendUserMessage(dst []byte, m *UserMessage) []byte {
	dst = append(dst, 0x80|byte(2+count(m.RunLoopID != "", m.Agent != "", m.Ask != nil)))
	dst = appendStr(appendStr(dst, "text"), m.Text)
	dst = appendStr(appendStr(dst, "messageId"), m.MessageID)
	dst = appendStrOmit(dst, "runLoopId", m.RunLoopID)
	dst = appendStrOmit(dst, "agent", m.Agent)
	if m.Ask != nil {
		dst = appendAsk(appendStr(dst, "ask"), m.Ask)
	}
	return dst
}

// DecodeUserMessage decodes b into m.
func DecodeUserMessage(b []byte, m *UserMessage) error {
	return decodeAgentData(b, m, decodeUserMessage)
}

// decodeAgentData decodes b into v by fast, the fast path, or else by the
// reflection codec, whose panics on malformed input (nil for a time) are
// errors here.
func decodeAgentData[T any](b []byte, v *T, fast func([]byte, *T) bool) error {
	var zero T
	*v = zero
	// The strings alias one copy of b, which nothing else holds: one
	// allocation for them all, and b may be reused.
	if fast(bytes.Clone(b), v) {
		return nil
	}
	*v = zero
	return unmarshalReflected(b, v)
}

func decodeUserMessage(b []byte, m *UserMessage) bool {
	return fastMap(b, func(key string, b []byte) ([]byte, uint, bool) {
		switch key {
		case "text":
			return fastStr(b, &m.Text, 0)
		case "messageId":
			return fastStr(b, &m.MessageID, 1)
		case "runLoopId":
			return fastStr(b, &m.RunLoopID, 2)
		case "agent":
			return fastStr(b, &m.Agent, 3)
		case "ask":
			return fastAsk(b, &m.Ask, 4)
		}
		return nil, 0, false
	})
}

func appendAsk(dst []byte, a *Ask) []byte {
	dst = append(dst, 0x80|byte(5+count(len(a.Within) > 0)))
	dst = appendStr(appendStr(dst, "agent"), a.Agent)
	dst = appendStr(appendStr(dst, "actionId"), a.ActionID)
	dst = appendStr(appendStr(dst, "runLoopId"), a.RunLoopID)
	dst = appendInt(appendStr(dst, "depth"), int64(a.Depth))
	dst = appendStr(appendStr(dst, "grants"), a.Grants)
	if len(a.Within) > 0 {
		dst = appendStrs(appendStr(dst, "within"), a.Within)
	}
	return dst
}

// fastAsk reads an *Ask: nil, or a map.
func fastAsk(b []byte, p **Ask, bit uint) ([]byte, uint, bool) {
	if len(b) > 0 && b[0] == 0xc0 {
		*p = nil
		return b[1:], bit, true
	}
	a := &Ask{}
	rest, ok := fastMapRest(b, func(key string, b []byte) ([]byte, uint, bool) {
		switch key {
		case "agent":
			return fastStr(b, &a.Agent, 0)
		case "actionId":
			return fastStr(b, &a.ActionID, 1)
		case "runLoopId":
			return fastStr(b, &a.RunLoopID, 2)
		case "depth":
			return fastInt(b, &a.Depth, 3)
		case "grants":
			return fastStr(b, &a.Grants, 4)
		case "within":
			return fastStrs(b, &a.Within, 5)
		}
		return nil, 0, false
	})
	*p = a
	return rest, bit, ok
}

// AppendActionData appends d's MsgPack encoding to dst.
func AppendActionData(dst []byte, d *ActionData) []byte {
	dst = append(dst, 0x80|byte(actionDataFields(d)))
	return appendActionDataFields(dst, d)
}

func actionDataFields(d *ActionData) int {
	return count(d.Text != "", d.Tool != "", d.Args != "", d.RunLoopID != "", d.Reason != "", d.Done, d.Keep, d.Approval != "")
}

func appendActionDataFields(dst []byte, d *ActionData) []byte {
	dst = appendStrOmit(dst, "text", d.Text)
	dst = appendStrOmit(dst, "tool", d.Tool)
	dst = appendStrOmit(dst, "args", d.Args)
	dst = appendStrOmit(dst, "runLoopId", d.RunLoopID)
	dst = appendStrOmit(dst, "reason", d.Reason)
	if d.Done {
		dst = append(appendStr(dst, "done"), 0xc3)
	}
	if d.Keep {
		dst = append(appendStr(dst, "keep"), 0xc3)
	}
	return appendStrOmit(dst, "approval", d.Approval)
}

// DecodeActionData decodes b into d.
func DecodeActionData(b []byte, d *ActionData) error {
	return decodeAgentData(b, d, decodeActionData)
}

func decodeActionData(b []byte, d *ActionData) bool {
	return fastMap(b, func(key string, b []byte) ([]byte, uint, bool) { return actionDataField(key, b, d) })
}

// actionDataField reads the field key of an ActionData; its bits are 0-7.
func actionDataField(key string, b []byte, d *ActionData) ([]byte, uint, bool) {
	switch key {
	case "text":
		return fastStr(b, &d.Text, 0)
	case "tool":
		return fastStr(b, &d.Tool, 1)
	case "args":
		return fastStr(b, &d.Args, 2)
	case "runLoopId":
		return fastStr(b, &d.RunLoopID, 3)
	case "reason":
		return fastStr(b, &d.Reason, 4)
	case "done":
		return fastBool(b, &d.Done, 5)
	case "keep":
		return fastBool(b, &d.Keep, 6)
	case "approval":
		return fastStr(b, &d.Approval, 7)
	}
	return nil, 0, false
}

// AppendActionEvent appends a's MsgPack encoding to dst: its ActionData's
// fields inline, between its type and its tick, as the reflection codec
// writes an embedded struct.
func AppendActionEvent(dst []byte, a *ActionEvent) []byte {
	dst = append(dst, 0x80|byte(1+actionDataFields(&a.ActionData)+count(a.Tick != 0, a.For != nil)))
	dst = appendStr(appendStr(dst, "type"), a.Type)
	dst = appendActionDataFields(dst, &a.ActionData)
	if a.Tick != 0 {
		dst = appendUint64(appendStr(dst, "tick"), a.Tick)
	}
	if a.For != nil {
		dst = appendAsk(appendStr(dst, "for"), a.For)
	}
	return dst
}

// DecodeActionEvent decodes b into a.
func DecodeActionEvent(b []byte, a *ActionEvent) error {
	return decodeAgentData(b, a, decodeActionEvent)
}

func decodeActionEvent(b []byte, a *ActionEvent) bool {
	return fastMap(b, func(key string, b []byte) ([]byte, uint, bool) {
		switch key {
		case "type":
			return fastStr(b, &a.Type, 8)
		case "tick":
			return fastUint(b, &a.Tick, 9)
		case "for":
			return fastAsk(b, &a.For, 10)
		}
		return actionDataField(key, b, &a.ActionData)
	})
}

// AppendIntentStarted appends d's MsgPack encoding to dst.
func AppendIntentStarted(dst []byte, d *IntentStarted) []byte {
	dst = append(dst, 0x80|byte(3+count(d.MessageID != "", d.MaxIterations != 0, d.Ask != nil)))
	dst = appendStr(appendStr(dst, "runLoopId"), d.RunLoopID)
	dst = appendStr(appendStr(dst, "agent"), d.Agent)
	dst = appendStr(appendStr(dst, "goal"), d.Goal)
	dst = appendStrOmit(dst, "messageId", d.MessageID)
	if d.MaxIterations != 0 {
		dst = appendInt(appendStr(dst, "maxIterations"), int64(d.MaxIterations))
	}
	if d.Ask != nil {
		dst = appendAsk(appendStr(dst, "ask"), d.Ask)
	}
	return dst
}

// DecodeIntentStarted decodes b into d.
func DecodeIntentStarted(b []byte, d *IntentStarted) error {
	return decodeAgentData(b, d, decodeIntentStarted)
}

func decodeIntentStarted(b []byte, d *IntentStarted) bool {
	return fastMap(b, func(key string, b []byte) ([]byte, uint, bool) {
		switch key {
		case "runLoopId":
			return fastStr(b, &d.RunLoopID, 0)
		case "agent":
			return fastStr(b, &d.Agent, 1)
		case "goal":
			return fastStr(b, &d.Goal, 2)
		case "messageId":
			return fastStr(b, &d.MessageID, 3)
		case "maxIterations":
			return fastInt(b, &d.MaxIterations, 4)
		case "ask":
			return fastAsk(b, &d.Ask, 5)
		}
		return nil, 0, false
	})
}

// AppendIntentEnded appends d's MsgPack encoding to dst.
func AppendIntentEnded(dst []byte, d *IntentEnded) []byte {
	dst = append(dst, 0x80|byte(2+count(d.Summary != "")))
	dst = appendStr(appendStr(dst, "runLoopId"), d.RunLoopID)
	dst = appendStr(appendStr(dst, "status"), d.Status)
	return appendStrOmit(dst, "summary", d.Summary)
}

// DecodeIntentEnded decodes b into d.
func DecodeIntentEnded(b []byte, d *IntentEnded) error {
	return decodeAgentData(b, d, decodeIntentEnded)
}

func decodeIntentEnded(b []byte, d *IntentEnded) bool {
	return fastMap(b, func(key string, b []byte) ([]byte, uint, bool) {
		switch key {
		case "runLoopId":
			return fastStr(b, &d.RunLoopID, 0)
		case "status":
			return fastStr(b, &d.Status, 1)
		case "summary":
			return fastStr(b, &d.Summary, 2)
		}
		return nil, 0, false
	})
}

// AppendTickRecord appends r's MsgPack encoding to dst.
func AppendTickRecord(dst []byte, r *TickRecord) []byte {
	dst = append(dst, 0x80|byte(4+count(len(r.Pending) > 0, len(r.Observed) > 0, r.Results != 0, r.Memory != "", r.MemoryChanged)))
	dst = appendUint64(appendStr(dst, "tick"), r.Tick)
	dst = appendTime(appendStr(dst, "at"), r.At)
	dst = appendFloat64(appendStr(dst, "hz"), r.Hz)
	dst = appendUint64(appendStr(dst, "seq"), r.Seq)
	if len(r.Pending) > 0 {
		dst = appendStrs(appendStr(dst, "pending"), r.Pending)
	}
	if len(r.Observed) > 0 {
		dst = appendStrs(appendStr(dst, "observed"), r.Observed)
	}
	if r.Results != 0 {
		dst = appendInt(appendStr(dst, "results"), int64(r.Results))
	}
	dst = appendStrOmit(dst, "memory", r.Memory)
	if r.MemoryChanged {
		dst = append(appendStr(dst, "memoryChanged"), 0xc3)
	}
	return dst
}

// DecodeTickRecord decodes b into r.
func DecodeTickRecord(b []byte, r *TickRecord) error {
	return decodeAgentData(b, r, decodeTickRecord)
}

func decodeTickRecord(b []byte, r *TickRecord) bool {
	return fastMap(b, func(key string, b []byte) ([]byte, uint, bool) {
		switch key {
		case "tick":
			return fastUint(b, &r.Tick, 0)
		case "at":
			if len(b) == 0 || b[0] == 0xc0 {
				return nil, 0, false
			}
			t, rest, err := readTime(b)
			if t.IsZero() {
				t = t.UTC() // as the reflection codec reads it: no location
			}
			r.At = t
			return rest, 1, err == nil
		case "hz":
			if len(b) < 9 || b[0] != 0xcb {
				return nil, 0, false
			}
			r.Hz = math.Float64frombits(binary.BigEndian.Uint64(b[1:]))
			return b[9:], 2, true
		case "seq":
			return fastUint(b, &r.Seq, 3)
		case "pending":
			return fastStrs(b, &r.Pending, 4)
		case "observed":
			return fastStrs(b, &r.Observed, 5)
		case "results":
			return fastInt(b, &r.Results, 6)
		case "memory":
			return fastStr(b, &r.Memory, 7)
		case "memoryChanged":
			return fastBool(b, &r.MemoryChanged, 8)
		}
		return nil, 0, false
	})
}

// AppendThought appends t's MsgPack encoding to dst.
func AppendThought(dst []byte, t *Thought) []byte {
	dst = append(dst, 0x80|byte(1+count(t.Tick != 0)))
	dst = appendStr(appendStr(dst, "text"), t.Text)
	if t.Tick != 0 {
		dst = appendUint64(appendStr(dst, "tick"), t.Tick)
	}
	return dst
}

// count is how many of set are true.
func count(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

// appendStrOmit appends key and s, unless s is empty (omitempty).
func appendStrOmit(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendStr(appendStr(dst, key), s)
}

func appendStrs(dst []byte, ss []string) []byte {
	dst = appendArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = appendStr(dst, s)
	}
	return dst
}

// appendUint64 writes v in nine bytes, as msgpack's reflection codec writes
// a uint64 field.
func appendUint64(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

// appendFloat64 writes f in nine bytes, as msgpack writes a float64.
func appendFloat64(dst []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(f))
}

// fastMap reads a map that fills b, handing each key and what follows it to
// field, which returns what follows the value, the field's bit, and false
// to give up. It gives up on a key seen twice.
func fastMap(b []byte, field func(key string, b []byte) ([]byte, uint, bool)) bool {
	rest, ok := fastMapRest(b, field)
	return ok && len(rest) == 0
}

// fastMapRest is fastMap for a map that b starts with; it returns what
// follows the map.
func fastMapRest(b []byte, field func(key string, b []byte) ([]byte, uint, bool)) ([]byte, bool) {
	if len(b) == 0 || b[0] == 0xc0 {
		return nil, false // nil: a zero value, which the reflection codec gives
	}
	n, b, err := readMapLen(b)
	if err != nil {
		return nil, false
	}
	var seen uint32
	for ; n > 0; n-- {
		var key string
		if len(b) == 0 || b[0]&0xe0 != 0xa0 { // the keys are fixstrs
			return nil, false
		}
		if key, b, err = readStr(b); err != nil {
			return nil, false
		}
		var bit uint
		var ok bool
		if b, bit, ok = field(key, b); !ok || seen&(1<<bit) != 0 {
			return nil, false
		}
		seen |= 1 << bit
	}
	return b, true
}

// fastStr reads a str (or nil, as "") into s, which aliases b.
func fastStr(b []byte, s *string, bit uint) ([]byte, uint, bool) {
	v, rest, err := readStr(b)
	*s = v
	return rest, bit, err == nil
}

func fastStrs(b []byte, ss *[]string, bit uint) ([]byte, uint, bool) {
	n, b, err := readArrayLen(b)
	if err != nil {
		return nil, 0, false
	}
	if n < 0 {
		*ss = nil
		return b, bit, true
	}
	out := make([]string, n)
	for i := range out {
		if out[i], b, err = readStr(b); err != nil {
			return nil, 0, false
		}
	}
	*ss = out
	return b, bit, true
}

func fastUint(b []byte, v *uint64, bit uint) ([]byte, uint, bool) {
	u, rest, err := readUint(b)
	*v = u
	return rest, bit, err == nil
}

func fastInt(b []byte, v *int, bit uint) ([]byte, uint, bool) {
	i, rest, err := readInt(b)
	*v = int(i)
	return rest, bit, err == nil
}

func fastBool(b []byte, v *bool, bit uint) ([]byte, uint, bool) {
	t, rest, err := readBool(b)
	*v = t
	return rest, bit, err == nil
}
