package wasm

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// The host module, "kairo": the functions a plugin imports. Each reads its
// arguments from the guest's memory, checking every range, and a range
// outside the memory stops the plugin. call and publish refuse what the
// plugin's Grants do not grant with abi.ErrnoNotGranted (grants.go); what
// they copy is charged to the plugin (cost.go).

const (
	maxMethodLen = 256
	maxLogLen    = 4 << 10
	maxLogLines  = 100 // per call; the rest are dropped
	// maxEventHead bounds what an event takes besides its data: its
	// subject, ids and source are bounded by abi's limits.
	maxEventHead = 4 << 10
)

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// hostFuncs are the host functions by name, with their signatures.
var hostFuncs = map[string]struct {
	fn              func(p *Plugin, ctx context.Context, m api.Module, stack []uint64)
	params, results []api.ValueType
}{
	abi.ImportCall:    {(*Plugin).hostCall, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i64}},
	abi.ImportPublish: {(*Plugin).hostPublish, []api.ValueType{i32, i32}, []api.ValueType{i32}},
	abi.ImportLog:     {(*Plugin).hostLog, []api.ValueType{i32, i32, i32}, nil},
	abi.ImportNow:     {(*Plugin).hostNow, nil, []api.ValueType{i64}},
}

func hostFuncNames() string {
	names := make([]string, 0, len(hostFuncs))
	for n := range hostFuncs {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// read returns a view of the guest's memory, or stops the guest: wazero
// turns the panic into the error of the export that is running, and
// importErr tells callRaw why.
func (p *Plugin) read(m api.Module, what string, ptr, n uint32) []byte {
	b, ok := m.Memory().Read(ptr, n)
	if !ok {
		err := &boundsError{what, ptr, n, m.Memory().Size()}
		p.importErr = err
		panic(err)
	}
	return b
}

func (p *Plugin) hostCall(_ context.Context, m api.Module, stack []uint64) {
	mptr, mlen, aptr, alen := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	method := p.read(m, abi.HostModule+".call method", mptr, mlen)
	args := p.read(m, abi.HostModule+".call args", aptr, alen)
	stack[0] = api.EncodeI64(p.importCall(string(method), args))
}

// importCall is the call import: it queues the call of method with args
// (a view it copies) and returns its token, or a negative abi.Errno.
func (p *Plugin) importCall(method string, args []byte) int64 {
	switch {
	case p.out == nil:
		return int64(abi.ErrnoBusy)
	case len(p.out.Calls) >= p.opts.MaxCalls:
		p.throttle.calls++
		return int64(abi.ErrnoBusy)
	case len(method) == 0 || len(method) > maxMethodLen || !utf8.ValidString(method):
		return int64(abi.ErrnoInvalid)
	case !p.opts.Grants.allowCall(method):
		p.deny(abi.ImportCall, method)
		return int64(abi.ErrnoNotGranted)
	}
	if len(args) > p.opts.MaxCallArgs {
		p.overCap(&CapError{What: abi.HostModule + ".call args of " + method, Got: int64(len(args)), Max: int64(p.opts.MaxCallArgs), Unit: "bytes", Cap: "InstanceConfig.MaxCallArgs"})
	}
	if err := p.charge(abi.HostModule+".call args", len(args)); err != nil {
		p.overCap(err)
	}
	p.nextToken++
	p.out.Calls = append(p.out.Calls, Call{Token: p.nextToken, Method: method, Args: slices.Clone(args)})
	return p.nextToken
}

func (p *Plugin) hostPublish(_ context.Context, m api.Module, stack []uint64) {
	raw := p.read(m, abi.HostModule+".publish event", uint32(stack[0]), uint32(stack[1]))
	stack[0] = api.EncodeI32(p.importPublish(raw))
}

// importPublish is the publish import: it takes the encoded event raw (a
// view it copies) for the bus, and returns 0 or a negative abi.Errno.
func (p *Plugin) importPublish(raw []byte) int32 {
	if p.out == nil {
		return int32(abi.ErrnoBusy)
	}
	if len(p.out.Published) >= p.opts.MaxPublishes {
		p.throttle.publishes++
		return int32(abi.ErrnoBusy)
	}
	// The bus would refuse the event: refuse it before copying it.
	if len(raw) > bus.MaxEventData+maxEventHead {
		p.overCap(&CapError{What: abi.HostModule + ".publish event", Got: int64(len(raw)), Max: bus.MaxEventData, Unit: "bytes", Cap: "bus.MaxEventData"})
	}
	if err := p.charge(abi.HostModule+".publish event", len(raw)); err != nil {
		p.overCap(err)
	}
	var ev abi.Event
	// DecodeEvent aliases its input, and guest memory changes under it.
	rest, err := abi.DecodeEvent(slices.Clone(raw), &ev)
	if err != nil || len(rest) != 0 || abi.ValidateSubject(ev.Type) != nil {
		return int32(abi.ErrnoInvalid)
	}
	if len(ev.Data) > bus.MaxEventData {
		p.overCap(&CapError{What: abi.HostModule + ".publish event " + ev.Type + " data", Got: int64(len(ev.Data)), Max: bus.MaxEventData, Unit: "bytes", Cap: "bus.MaxEventData"})
	}
	if !p.opts.Grants.allowPublish(ev.Type) {
		p.deny(abi.ImportPublish, ev.Type)
		return int32(abi.ErrnoNotGranted)
	}
	ev.Source = p.source() // the batch's writer, when it is not the plugin (writer.go)
	// An id the plugin chose is stored in its source's scope, as
	// events.publish stores a client's: no plugin claims an id the
	// kernel derives, or another principal's (abi.ScopeEventID).
	id, err := abi.ScopeEventID(ev.Source, ev.ID)
	if err != nil {
		return int32(abi.ErrnoInvalid)
	}
	ev.ID, ev.Seq = id, 0
	p.out.Published = append(p.out.Published, ev)
	return 0
}

func (p *Plugin) hostLog(ctx context.Context, m api.Module, stack []uint64) {
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	p.importLog(ctx, level, p.read(m, abi.HostModule+".log message", ptr, n))
}

// importLog is the log import: msg, a view, at level.
func (p *Plugin) importLog(ctx context.Context, level int32, msg []byte) {
	if p.logLines++; p.logLines > maxLogLines {
		p.throttle.logLines++
		return
	}
	if len(msg) > maxLogLen {
		msg = msg[:maxLogLen]
		p.throttle.logBytes++
	}
	p.logger.Log(ctx, slog.Level(level), strings.ToValidUTF8(string(msg), "\uFFFD"))
}

func (p *Plugin) hostNow(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = uint64(p.now)
}
