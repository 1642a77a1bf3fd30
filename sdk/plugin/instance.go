package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// instance is one plugin's side of the ABI: its handlers, and the buffers
// its calls reuse. A wasm module holds one (module); the host makes one for
// each start of a plugin built into it (Native). One call runs at a time.
//
// Every allocation counts inside a guest, where the Go collector's work
// lands on the calls that allocate: batch is decoded call after call into
// the same events (Plugin.Handle says what a handler may keep).
type instance struct {
	p           Plugin
	batch       abi.Batch
	out         []byte
	toolResults []abi.ToolResult
}

// init answers abi.ExportInit: in is the encoded abi.PluginConfig, the
// result the encoded abi.InitResult. The config and the result cross
// once, so they take the reflection codec.
func (g *instance) init(in []byte) []byte {
	var cfg abi.PluginConfig
	var res abi.InitResult
	if err := msgpack.Unmarshal(in, &cfg); err != nil {
		res.Error = "plugin config: " + err.Error()
	} else if g.p.Init == nil {
		res.Error = "the plugin registered no Init (call plugin.Register from an init function)"
	} else if res.Info, err = g.p.Init(cfg); err != nil {
		res.Error = err.Error()
	} else {
		g.describe(&res.Info)
	}
	out, err := msgpack.Marshal(&res)
	if err != nil {
		// Only a value the codec cannot write gets here; say so in the
		// shape the host expects.
		return g.initError("encode the init result: " + err.Error())
	}
	return out
}

// handle answers abi.ExportHandle: in is the encoded abi.Batch, the result
// the encoded abi.Reply, valid until the next call.
func (g *instance) handle(in []byte) []byte {
	var reply abi.Reply
	// The batch decodes from a copy of its own, since its strings alias
	// what they decode from and the handler may keep them past this call.
	if err := abi.DecodeBatchReusing(bytes.Clone(in), &g.batch); err != nil {
		reply.Error = "batch: " + err.Error()
	} else if reply, err = g.run(&g.batch); err != nil {
		reply.Error = err.Error()
	}
	g.out = abi.AppendReply(g.out[:0], &reply)
	return g.out
}

// initError is the encoded abi.InitResult of an init that failed with msg.
func (g *instance) initError(msg string) []byte {
	out, _ := msgpack.Marshal(&abi.InitResult{Error: msg})
	return out
}

// describe adds the definitions of the plugin's tools to info, except
// those Init described itself.
func (g *instance) describe(info *abi.PluginInfo) {
	for _, t := range g.p.Tools {
		if !slices.ContainsFunc(info.Tools, func(d abi.Tool) bool { return d.Name == t.Name }) {
			info.Tools = append(info.Tools, t.Tool)
		}
	}
}

// run runs the plugin's tools on b's tool calls, then Handle on what is
// left, and answers with both. The tool results' slice is reused: a reply
// is encoded before the next call.
func (g *instance) run(b *abi.Batch) (abi.Reply, error) {
	results := g.toolResults[:0]
	left := b.ToolCalls[:0]
	for i := range b.ToolCalls {
		c := &b.ToolCalls[i]
		j := slices.IndexFunc(g.p.Tools, func(t Tool) bool { return t.Name == c.Name })
		switch {
		case j >= 0:
			res := abi.ToolResult{ID: c.ID}
			var err error
			if res.Content, err = g.p.Tools[j].Run(c); err != nil {
				res.Content, res.IsError = err.Error(), true
			}
			results = append(results, res)
		case g.p.Handle == nil:
			results = append(results, abi.ToolResult{ID: c.ID, IsError: true, Content: "this plugin has no tool " + strconv.Quote(c.Name)})
		default:
			left = append(left, *c)
		}
	}
	b.ToolCalls = left
	var reply abi.Reply
	var err error
	switch {
	case g.p.Handle != nil:
		reply, err = g.p.Handle(b)
	case len(g.p.Tools) == 0:
		err = errors.New("the plugin registered no Handle and no Tools")
	}
	if len(results) > 0 {
		reply.ToolResults = append(results, reply.ToolResults...)
		g.toolResults = reply.ToolResults
	}
	return reply, err
}

// encoder holds the buffers a plugin's host calls encode into, reused from
// call to call.
type encoder struct {
	event []byte
	args  bytes.Buffer
	enc   *msgpack.Encoder
}

// encodeEvent encodes ev for the publish import; valid until the next.
func (e *encoder) encodeEvent(ev *abi.Event) []byte {
	e.event = abi.AppendEvent(e.event[:0], ev)
	return e.event
}

// encodeArgs encodes a call's args for the call import; valid until the
// next.
func (e *encoder) encodeArgs(method string, args any) ([]byte, error) {
	if e.enc == nil {
		e.enc = msgpack.NewEncoder(&e.args)
	}
	e.args.Reset()
	if err := e.enc.Encode(args); err != nil {
		return nil, fmt.Errorf("call %s: encode args: %w", method, err)
	}
	return e.args.Bytes(), nil
}

func publishErr(subject string, errno int32) error {
	return fmt.Errorf("publish %s: %w", subject, abi.Errno(errno))
}

func callErr(method string, errno int64) error {
	return fmt.Errorf("call %s: %w", method, abi.Errno(errno))
}
