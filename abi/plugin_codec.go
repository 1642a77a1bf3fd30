package abi

import (
	"bytes"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Hand-written codecs of the values that cross the plugin boundary on every
// batch, with the keys of their tags: the same bytes as the reflection codec
// with compact ints. Both sides are untrusted by the other, so the decoders
// check every length against their input; what they return aliases it.
// PluginConfig and InitResult, which cross once, keep the reflection codec.

// AppendBatch appends b's MsgPack encoding to dst.
func AppendBatch(dst []byte, b *Batch) []byte {
	n := 1
	for _, set := range [...]bool{b.Tick != 0, len(b.Events) > 0, len(b.ToolCalls) > 0, len(b.CallResults) > 0, len(b.ServiceCalls) > 0, b.Agent != nil} {
		if set {
			n++
		}
	}
	dst = appendTime(appendStr(append(dst, 0x80|byte(n)), "time"), b.Time)
	if b.Tick != 0 {
		dst = appendUint(appendStr(dst, "tick"), b.Tick)
	}
	if len(b.Events) > 0 {
		dst = appendArrayLen(appendStr(dst, "events"), len(b.Events))
		for i := range b.Events {
			dst = AppendEvent(dst, &b.Events[i])
		}
	}
	if len(b.ToolCalls) > 0 {
		dst = appendArrayLen(appendStr(dst, "toolCalls"), len(b.ToolCalls))
		for i := range b.ToolCalls {
			dst = appendToolCall(dst, &b.ToolCalls[i])
		}
	}
	if len(b.CallResults) > 0 {
		dst = appendArrayLen(appendStr(dst, "callResults"), len(b.CallResults))
		for i := range b.CallResults {
			dst = appendCallResult(dst, &b.CallResults[i])
		}
	}
	if len(b.ServiceCalls) > 0 {
		dst = appendArrayLen(appendStr(dst, "serviceCalls"), len(b.ServiceCalls))
		for i := range b.ServiceCalls {
			dst = appendServiceCall(dst, &b.ServiceCalls[i])
		}
	}
	if b.Agent != nil {
		// Once a tick, for a policy: the reflection codec is fast enough.
		dst = appendReflected(appendStr(dst, "agent"), b.Agent)
	}
	return dst
}

// unmarshalReflected decodes raw into v with the reflection codec, which
// panics on some malformed inputs (nil for a struct-valued field): a panic
// is an error like any other bad input. A length past the input would make
// it allocate what the length claims before it finds the bytes missing
// (docs/RATIONALE.md#untrusted-msgpack): the walker refuses that first.
func unmarshalReflected(raw []byte, v any) (err error) {
	if _, _, err := skip(raw, 0); err != nil {
		return fmt.Errorf("malformed %T: %w", v, err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed %T: %v", v, r)
		}
	}()
	return msgpack.Unmarshal(raw, v)
}

// appendReflected appends v as the reflection codec writes it, with compact
// ints as the hand-written codecs do.
func appendReflected(dst []byte, v any) []byte {
	w := bytes.NewBuffer(dst)
	enc := msgpack.NewEncoder(w)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("abi: encode %T: %v", v, err)) // plain data: cannot fail
	}
	return w.Bytes()
}

func appendServiceCall(dst []byte, c *ServiceCall) []byte {
	n := 2
	if len(c.Args) > 0 {
		n++
	}
	if c.From != "" {
		n++
	}
	dst = appendInt(appendStr(append(dst, 0x80|byte(n)), "id"), c.ID)
	dst = appendStr(appendStr(dst, "method"), c.Method)
	if len(c.Args) > 0 {
		dst = append(appendStr(dst, "args"), c.Args...)
	}
	if c.From != "" {
		dst = appendStr(appendStr(dst, "from"), c.From)
	}
	return dst
}

func appendToolCall(dst []byte, c *ToolCall) []byte {
	n := 2
	if c.Arguments != "" {
		n++
	}
	if c.CorrelationID != "" {
		n++
	}
	dst = appendStr(appendStr(append(dst, 0x80|byte(n)), "id"), c.ID)
	dst = appendStr(appendStr(dst, "name"), c.Name)
	if c.Arguments != "" {
		dst = appendStr(appendStr(dst, "arguments"), c.Arguments)
	}
	if c.CorrelationID != "" {
		dst = appendStr(appendStr(dst, "correlationId"), c.CorrelationID)
	}
	return dst
}

func appendCallResult(dst []byte, r *CallResult) []byte {
	n := 1
	if len(r.Result) > 0 {
		n++
	}
	if r.Error != nil {
		n++
	}
	dst = appendInt(appendStr(append(dst, 0x80|byte(n)), "token"), r.Token)
	if len(r.Result) > 0 {
		dst = append(appendStr(dst, "result"), r.Result...)
	}
	if r.Error != nil {
		dst = appendError(appendStr(dst, "error"), r.Error)
	}
	return dst
}

// DecodeBatch decodes a [Batch] that fills all of in. Strings and raw values
// alias in, so in must not change while b is in use.
func DecodeBatch(in []byte, b *Batch) error {
	if decodeBatchFast(in, b, nil) {
		return nil
	}
	return decodeBatch(in, b)
}

// decodeBatch is the general decoder of DecodeBatch, for every form.
func decodeBatch(in []byte, b *Batch) error {
	*b = Batch{}
	rest, err := readMap(in, "batch", func(key string, in []byte) (rest []byte, err error) {
		switch key {
		case "time":
			b.Time, rest, err = readTime(in)
			if b.Time.IsZero() {
				b.Time = time.Time{}
			}
		case "tick":
			b.Tick, rest, err = readUint(in)
		case "events":
			b.Events, rest, err = readSlice(in, DecodeEvent)
		case "toolCalls":
			b.ToolCalls, rest, err = readSlice(in, decodeToolCall)
		case "callResults":
			b.CallResults, rest, err = readSlice(in, decodeCallResult)
		case "serviceCalls":
			b.ServiceCalls, rest, err = readSlice(in, decodeServiceCall)
		case "agent":
			var raw []byte
			if raw, rest, err = readRaw(in); err == nil && !(len(raw) == 1 && raw[0] == 0xc0) {
				b.Agent = new(AgentInput)
				err = unmarshalReflected(raw, b.Agent)
			}
		default:
			_, rest, err = skip(in, 0)
		}
		return rest, err
	})
	return whole("batch", rest, err)
}

func decodeToolCall(in []byte, c *ToolCall) ([]byte, error) {
	*c = ToolCall{}
	return readMap(in, "tool call", func(key string, in []byte) (rest []byte, err error) {
		switch key {
		case "id":
			c.ID, rest, err = readStr(in)
		case "name":
			c.Name, rest, err = readStr(in)
		case "arguments":
			c.Arguments, rest, err = readStr(in)
		case "correlationId":
			c.CorrelationID, rest, err = readStr(in)
		default:
			_, rest, err = skip(in, 0)
		}
		return rest, err
	})
}

func decodeServiceCall(in []byte, c *ServiceCall) ([]byte, error) {
	*c = ServiceCall{}
	return readMap(in, "service call", func(key string, in []byte) (rest []byte, err error) {
		switch key {
		case "id":
			c.ID, rest, err = readInt(in)
		case "method":
			c.Method, rest, err = readStr(in)
		case "args":
			c.Args, rest, err = readRaw(in)
		case "from":
			c.From, rest, err = readStr(in)
		default:
			_, rest, err = skip(in, 0)
		}
		return rest, err
	})
}

func decodeCallResult(in []byte, r *CallResult) ([]byte, error) {
	*r = CallResult{}
	return readMap(in, "call result", func(key string, in []byte) (rest []byte, err error) {
		switch key {
		case "token":
			r.Token, rest, err = readInt(in)
		case "result":
			r.Result, rest, err = readRaw(in)
		case "error":
			if len(in) > 0 && in[0] == 0xc0 {
				r.Error = nil
				return in[1:], nil
			}
			r.Error, rest, err = readError(in)
		default:
			_, rest, err = skip(in, 0)
		}
		return rest, err
	})
}

func readError(in []byte) (*Error, []byte, error) {
	e := new(Error)
	rest, err := readMap(in, "error", func(key string, in []byte) (rest []byte, err error) {
		switch key {
		case "code":
			e.Code, rest, err = readStr(in)
		case "message":
			e.Message, rest, err = readStr(in)
		default:
			_, rest, err = skip(in, 0)
		}
		return rest, err
	})
	return e, rest, err
}

// AppendReply appends r's MsgPack encoding to dst.
func AppendReply(dst []byte, r *Reply) []byte {
	n := 0
	for _, set := range [...]bool{r.Thought != "", len(r.Actions) > 0, len(r.ToolResults) > 0, len(r.ServiceResults) > 0, r.Error != ""} {
		if set {
			n++
		}
	}
	dst = append(dst, 0x80|byte(n))
	if r.Thought != "" {
		dst = appendStr(appendStr(dst, "thought"), r.Thought)
	}
	if len(r.Actions) > 0 {
		dst = appendArrayLen(appendStr(dst, "actions"), len(r.Actions))
		for i := range r.Actions {
			dst = appendAction(dst, &r.Actions[i])
		}
	}
	if len(r.ToolResults) > 0 {
		dst = appendArrayLen(appendStr(dst, "toolResults"), len(r.ToolResults))
		for i := range r.ToolResults {
			dst = appendToolResult(dst, &r.ToolResults[i])
		}
	}
	if len(r.ServiceResults) > 0 {
		dst = appendArrayLen(appendStr(dst, "serviceResults"), len(r.ServiceResults))
		for i := range r.ServiceResults {
			dst = appendCallResult(dst, &r.ServiceResults[i])
		}
	}
	if r.Error != "" {
		dst = appendStr(appendStr(dst, "error"), r.Error)
	}
	return dst
}

func appendAction(dst []byte, a *Action) []byte {
	// Once per action on every tick, inside the guest: the keys go out as
	// constants with their headers, the fields counted without a loop.
	n := byte(0x81)
	if a.ID != "" {
		n++
	}
	if a.CorrelationID != "" {
		n++
	}
	if a.CausationID != "" {
		n++
	}
	if len(a.Data) > 0 {
		n++
	}
	dst = append(dst, n)
	if a.ID != "" {
		dst = appendStr(append(dst, "\xa2id"...), a.ID)
	}
	dst = appendStr(append(dst, "\xa4type"...), a.Type)
	if a.CorrelationID != "" {
		dst = appendStr(append(dst, "\xadcorrelationId"...), a.CorrelationID)
	}
	if a.CausationID != "" {
		dst = appendStr(append(dst, "\xabcausationId"...), a.CausationID)
	}
	if len(a.Data) > 0 {
		dst = append(append(dst, "\xa4data"...), a.Data...)
	}
	return dst
}

func appendToolResult(dst []byte, r *ToolResult) []byte {
	n := 2
	if r.IsError {
		n++
	}
	dst = appendStr(appendStr(append(dst, 0x80|byte(n)), "id"), r.ID)
	dst = appendStr(appendStr(dst, "content"), r.Content)
	if r.IsError {
		dst = append(appendStr(dst, "isError"), 0xc3)
	}
	return dst
}

// DecodeReply decodes a [Reply] that fills all of in. Strings and raw values
// alias in, so in must not change while r is in use.
func DecodeReply(in []byte, r *Reply) error {
	*r = Reply{}
	rest, err := readMap(in, "reply", func(key string, in []byte) (rest []byte, err error) {
		switch key {
		case "thought":
			r.Thought, rest, err = readStr(in)
		case "actions":
			r.Actions, rest, err = readSlice(in, decodeAction)
		case "toolResults":
			r.ToolResults, rest, err = readSlice(in, decodeToolResult)
		case "serviceResults":
			r.ServiceResults, rest, err = readSlice(in, decodeCallResult)
		case "error":
			r.Error, rest, err = readStr(in)
		default:
			_, rest, err = skip(in, 0)
		}
		return rest, err
	})
	return whole("reply", rest, err)
}

func decodeAction(in []byte, a *Action) ([]byte, error) {
	*a = Action{}
	return readMap(in, "action", func(key string, in []byte) (rest []byte, err error) {
		switch key {
		case "id":
			a.ID, rest, err = readStr(in)
		case "type":
			a.Type, rest, err = readStr(in)
		case "correlationId":
			a.CorrelationID, rest, err = readStr(in)
		case "causationId":
			a.CausationID, rest, err = readStr(in)
		case "data":
			a.Data, rest, err = readRaw(in)
		default:
			_, rest, err = skip(in, 0)
		}
		return rest, err
	})
}

func decodeToolResult(in []byte, r *ToolResult) ([]byte, error) {
	*r = ToolResult{}
	return readMap(in, "tool result", func(key string, in []byte) (rest []byte, err error) {
		switch key {
		case "id":
			r.ID, rest, err = readStr(in)
		case "content":
			r.Content, rest, err = readStr(in)
		case "isError":
			r.IsError, rest, err = readBool(in)
		default:
			_, rest, err = skip(in, 0)
		}
		return rest, err
	})
}

// readSlice reads an array of values with decode, into a new slice (nil for
// a MsgPack nil). A repeated key replaces the earlier slice, as the
// reflection codec does.
func readSlice[T any](in []byte, decode func([]byte, *T) ([]byte, error)) ([]T, []byte, error) {
	n, in, err := readArrayLen(in)
	if err != nil || n < 0 {
		return nil, in, err
	}
	s := make([]T, n)
	for i := range s {
		if in, err = decode(in, &s[i]); err != nil {
			return nil, nil, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return s, in, nil
}

// whole turns bytes left after a decoded value into an error.
func whole(what string, rest []byte, err error) error {
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%s: %d bytes after its MsgPack value", what, len(rest))
	}
	return err
}
