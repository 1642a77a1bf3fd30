package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// Each way a plugin can make the host copy, keep or allocate more than its
// caps allow stops it with ReasonLimit and an error that names the cap; the
// same thing within the cap is served; the neighbour serves throughout.
func TestCostCaps(t *testing.T) {
	neighbour := load(t, "echo", InstanceConfig{Name: "neighbour"})
	initPlugin(t, neighbour, nil)

	cases := []struct {
		name    string
		opts    InstanceConfig
		attack  map[string]any // stopped, naming cap
		control map[string]any // the same within the cap: served
		cap     string
	}{
		{"call arguments", InstanceConfig{MaxCallArgs: 64 << 10},
			map[string]any{"calls": 1, "callSize": 100 << 10},
			map[string]any{"calls": 1, "callSize": 32 << 10}, "InstanceConfig.MaxCallArgs"},
		{"bytes copied in a batch", InstanceConfig{MaxBatchBytes: 1 << 20},
			map[string]any{"calls": 40, "callSize": 32 << 10},
			map[string]any{"calls": 20, "callSize": 32 << 10}, "InstanceConfig.MaxBatchBytes"},
		{"an event over the bus's maximum", InstanceConfig{},
			map[string]any{"publishes": 1, "publishSize": bus.MaxEventData + 1},
			map[string]any{"publishes": 1, "publishSize": 64 << 10}, "bus.MaxEventData"},
		{"actions in a reply", InstanceConfig{MaxActions: 100},
			map[string]any{"actions": 101},
			map[string]any{"actions": 100}, "InstanceConfig.MaxActions"},
		{"output bytes", InstanceConfig{MaxOutput: 16 << 10, MaxActions: 100_000},
			map[string]any{"actions": 20_000},
			map[string]any{"actions": 200}, "InstanceConfig.MaxOutput"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			control := load(t, "hostile", c.opts)
			initPlugin(t, control, withMode("cost", c.control))
			for range 2 {
				out, err := control.Handle(context.Background(), testBatch(1, 8))
				if err != nil {
					t.Fatalf("the control within the cap: %v", err)
				}
				if out.Throttled != nil {
					t.Fatalf("the control was throttled: %+v", out.Throttled)
				}
			}

			p := load(t, "hostile", c.opts)
			initPlugin(t, p, withMode("cost", c.attack))
			_, err := p.Handle(context.Background(), testBatch(1, 8))
			var f *Failure
			var ce *CapError
			if !errors.As(err, &f) || f.Reason != ReasonLimit || !errors.As(err, &ce) || ce.Cap != c.cap {
				t.Fatalf("err = %v; want a %s failure naming %s", err, ReasonLimit, c.cap)
			}
			t.Log(strings.SplitN(err.Error(), "\n", 2)[0])
			if _, err := p.Handle(context.Background(), testBatch(1, 8)); !errors.Is(err, ErrStopped) {
				t.Fatalf("a call after the failure: %v; want ErrStopped", err)
			}
			if out, err := neighbour.Handle(context.Background(), testBatch(3, 64)); err != nil || len(out.Reply.Actions) != 3 {
				t.Fatalf("the neighbour after %s: %v", c.name, err)
			}
		})
	}
}

func withMode(mode string, cfg map[string]any) map[string]any {
	m := map[string]any{"mode": mode}
	for k, v := range cfg {
		m[k] = v
	}
	return m
}

// The caps that refuse without stopping — calls and publishes per batch,
// log lines and their length — are counted in the batch's Output, which
// the manager reports as one event; a batch within them counts nothing.
func TestThrottledIsCounted(t *testing.T) {
	p := load(t, "hostile", InstanceConfig{MaxCalls: 10, MaxPublishes: 20})
	initPlugin(t, p, withMode("cost", map[string]any{
		"calls": 15, "publishes": 50, "logs": maxLogLines + 7, "logSize": maxLogLen + 1,
	}))
	for range 2 {
		out, err := p.Handle(context.Background(), testBatch(1, 8))
		if err != nil {
			t.Fatal(err)
		}
		want := []abi.PluginCap{
			{Cap: "calls", Limit: 10, Over: 5},
			{Cap: "publishes", Limit: 20, Over: 30},
			{Cap: "log lines", Limit: maxLogLines, Over: 7},
			{Cap: "log bytes", Limit: maxLogLen, Over: maxLogLines},
		}
		if len(out.Throttled) != len(want) {
			t.Fatalf("throttled = %+v; want %+v", out.Throttled, want)
		}
		for i := range want {
			if out.Throttled[i] != want[i] {
				t.Fatalf("throttled = %+v; want %+v", out.Throttled, want)
			}
		}
		if len(out.Calls) != 10 || len(out.Published) != 20 || out.Reply.Thought != "called 10, published 20" {
			t.Fatalf("%d calls, %d published, thought %q", len(out.Calls), len(out.Published), out.Reply.Thought)
		}
	}
	control := load(t, "hostile", InstanceConfig{MaxCalls: 10, MaxPublishes: 20})
	initPlugin(t, control, withMode("cost", map[string]any{"calls": 10, "publishes": 20, "logs": maxLogLines, "logSize": maxLogLen}))
	if out, err := control.Handle(context.Background(), testBatch(1, 8)); err != nil || out.Throttled != nil {
		t.Fatalf("the control: %v, throttled %+v", err, out.Throttled)
	}
}

// A reply of millions of empty actions is refused on its count, before the
// decoder allocates a slice for them, and without allocating itself.
func TestReplyCountCheckedBeforeDecoding(t *testing.T) {
	const n = 4 << 20
	reply := binary.BigEndian.AppendUint32([]byte{0x81, 0xa7, 'a', 'c', 't', 'i', 'o', 'n', 's', 0xdd}, n)
	for range n {
		reply = append(reply, 0x80)
	}
	var err error
	allocs := testing.AllocsPerRun(1, func() { err = checkReplyCounts(reply, 1024) })
	var ce *CapError
	if !errors.As(err, &ce) || ce.Cap != "InstanceConfig.MaxActions" || ce.Got != n {
		t.Fatalf("err = %v; want the action cap", err)
	}
	if allocs > 2 { // the error and its text
		t.Fatalf("checking the counts allocated %v times", allocs)
	}
	// A reply within the caps passes, whatever its other fields hold.
	ok := abi.AppendReply(nil, &abi.Reply{
		Thought: "t", Error: "e",
		Actions:        make([]abi.Action, 1024),
		ToolResults:    []abi.ToolResult{{ID: "1", Content: strings.Repeat("x", 70000)}},
		ServiceResults: []abi.CallResult{{Token: 1, Error: &abi.Error{Code: "c", Message: "m"}}},
	})
	if err := checkReplyCounts(ok, 1024); err != nil {
		t.Fatalf("a reply within the caps: %v", err)
	}
	var r abi.Reply
	if err := abi.DecodeReply(ok, &r); err != nil || len(r.Actions) != 1024 {
		t.Fatalf("decode: %v", err)
	}
}

// A module over a cap is refused before it is compiled, with an error that
// names the cap; a module within them loads. The guests the tests build
// from Go sit well inside them.
func TestModuleCaps(t *testing.T) {
	for _, g := range []string{"echo", "hostile"} {
		fns, customs, customBytes := moduleStats(guests[g])
		t.Logf("guest %s: %d bytes, %d functions, %d custom sections of %d bytes", g, len(guests[g]), fns, customs, customBytes)
		if len(guests[g]) > MaxModuleBytes/4 || fns > MaxModuleFunctions/4 || customs > MaxCustomSections/4 || customBytes > MaxCustomSectionBytes/4 {
			t.Errorf("guest %s is within a factor of 4 of a module cap", g)
		}
	}
	asm := asmGuest{version: 1}.bytes()
	// custom appends n custom sections of size zero bytes each, as section
	// would, into one new slice whose payloads the test never writes: a
	// module past MaxModuleBytes built by appends (written, then copied
	// twice) took seconds of CPU under the race detector, most of it page
	// faults.
	custom := func(m []byte, n, size int) []byte {
		var heads [][]byte
		total := len(m)
		for i := range n {
			nm := name(nil, "c"+string(rune('a'+i%26)))
			h := append(uleb([]byte{0}, uint64(len(nm)+size)), nm...)
			heads = append(heads, h)
			total += len(h) + size
		}
		out := make([]byte, total)
		off := copy(out, m)
		for _, h := range heads {
			off += copy(out[off:], h) + size
		}
		return out
	}
	// A function section that claims more functions than the cap; the
	// compiler would find the module malformed, after reading them all.
	tooMany := section(append([]byte(nil), wasmHeader...), 3, uleb(nil, MaxModuleFunctions+1))
	cases := []struct {
		name string
		wasm []byte
		cap  string
	}{
		{"module bytes", custom(append([]byte(nil), asm...), 1, MaxModuleBytes), "host.MaxModuleBytes"},
		{"custom sections", custom(append([]byte(nil), asm...), MaxCustomSections+1, 1), "host.MaxCustomSections"},
		{"custom section bytes", custom(append([]byte(nil), asm...), 2, MaxCustomSectionBytes/2+1), "host.MaxCustomSectionBytes"},
		{"functions", tooMany, "host.MaxModuleFunctions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := testEngine.Load(context.Background(), c.wasm, InstanceConfig{Name: "big"})
			var f *Failure
			var ce *CapError
			if !errors.As(err, &f) || f.Reason != ReasonRefused || !errors.As(err, &ce) || ce.Cap != c.cap {
				t.Fatalf("err = %v; want refused naming %s", err, c.cap)
			}
			t.Log(err)
		})
	}
	// The control: custom sections within the caps.
	p := loadBytes(t, "asm", custom(append([]byte(nil), asm...), MaxCustomSections-1, 1024), InstanceConfig{})
	initPlugin(t, p, nil)
	if _, err := p.Handle(context.Background(), testBatch(1, 8)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkReplyCountCheck is what counting a reply costs before it is
// decoded: 30 actions of 64 B (BenchmarkTickRoundTrip's 3 are under the
// size where the count needs no check).
func BenchmarkReplyCountCheck(b *testing.B) {
	batch := testBatch(30, 64)
	var r abi.Reply
	for _, ev := range batch.Events {
		r.Actions = append(r.Actions, abi.Action{ID: ev.ID, Type: abi.ActionNoop, CorrelationID: ev.CorrelationID, Data: ev.Data})
	}
	raw := abi.AppendReply(nil, &r)
	b.ReportAllocs()
	for range b.N {
		if err := checkReplyCounts(raw, 1024); err != nil {
			b.Fatal(err)
		}
	}
}
