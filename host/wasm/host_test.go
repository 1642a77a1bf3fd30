package wasm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

func testBatch(n, size int) *abi.Batch {
	b := &abi.Batch{Time: time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC), Tick: 7}
	for i := range n {
		data, _ := msgpack.Marshal(strings.Repeat("x", size))
		b.Events = append(b.Events, abi.Event{
			ID:            fmt.Sprintf("ev-%d", i),
			Type:          "kairo.user.message",
			Time:          b.Time,
			Data:          data,
			CorrelationID: "run-1",
		})
	}
	return b
}

func configOf(m map[string]any) abi.PluginConfig { return abi.PluginConfig{Config: m} }

func initPlugin(t *testing.T, p *Plugin, config map[string]any) abi.PluginInfo {
	t.Helper()
	info, err := p.Init(context.Background(), abi.PluginConfig{Config: config})
	if err != nil {
		t.Fatalf("init: %v", err)
	}
	return info
}

func TestInitReturnsPluginInfo(t *testing.T) {
	p := load(t, "echo", InstanceConfig{})
	info := initPlugin(t, p, nil)
	if info.Name != "echo" || info.Version != "0.1.0" || len(info.Kinds) != 1 || info.Kinds[0] != abi.KindPolicy ||
		len(info.Subscriptions) != 1 || info.Subscriptions[0] != ">" {
		t.Fatalf("info = %+v", info)
	}
}

func TestHandleRoundTrip(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			p := load(t, "echo", InstanceConfig{Trusted: trusted})
			initPlugin(t, p, nil)
			batch := testBatch(3, 64)
			for round := range 3 { // the input buffer and the output are reused
				out, err := p.Handle(context.Background(), batch)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if len(out.Reply.Actions) != 3 || len(out.Published) != 3 {
					t.Fatalf("round %d: %d actions, %d published; want 3 and 3", round, len(out.Reply.Actions), len(out.Published))
				}
				for i, a := range out.Reply.Actions {
					ev := batch.Events[i]
					if a.ID != ev.ID || a.Type != abi.ActionNoop || a.CorrelationID != "run-1" || string(a.Data) != string(ev.Data) {
						t.Fatalf("action %d = %+v", i, a)
					}
					pub := out.Published[i]
					if pub.Type != "echo."+ev.Type || pub.Source != "plugin/echo" || pub.CausationID != ev.ID || string(pub.Data) != string(ev.Data) {
						t.Fatalf("published %d = %+v", i, pub)
					}
				}
			}
		})
	}
}

func TestImports(t *testing.T) {
	p := load(t, "hostile", InstanceConfig{})
	initPlugin(t, p, map[string]any{"mode": "imports"})
	batch := testBatch(0, 0)
	for want := int64(1); want <= 2; want++ {
		out, err := p.Handle(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		// now is the batch's time, not the wall clock.
		if got := out.Reply.Thought; got != batch.Time.Format(time.RFC3339Nano) {
			t.Fatalf("now = %s, want the batch time %s", got, batch.Time.Format(time.RFC3339Nano))
		}
		if len(out.Calls) != 1 || out.Calls[0].Token != want || out.Calls[0].Method != abi.MethodKernelPing {
			t.Fatalf("calls = %+v; want one kernel.ping with token %d", out.Calls, want)
		}
		var args map[string]int
		if err := msgpack.Unmarshal(out.Calls[0].Args, &args); err != nil || args["n"] != 1 {
			t.Fatalf("args = %v (%v)", args, err)
		}
		if out.Reply.Actions[0].ID != fmt.Sprint(want) {
			t.Fatalf("the plugin saw token %s, want %d", out.Reply.Actions[0].ID, want)
		}
	}
}

// A flooding plugin is refused with ErrnoBusy, not stopped.
func TestPublishFlood(t *testing.T) {
	p := load(t, "hostile", InstanceConfig{MaxPublishes: 10})
	initPlugin(t, p, map[string]any{"mode": "flood"})
	out, err := p.Handle(context.Background(), testBatch(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Published) != 10 || !strings.Contains(out.Reply.Thought, "refused after 10") {
		t.Fatalf("published %d, thought %q; want 10 and a refusal", len(out.Published), out.Reply.Thought)
	}
	if _, err := p.Handle(context.Background(), testBatch(0, 0)); err != nil {
		t.Fatalf("the next batch: %v", err)
	}
}

// Each hostile plugin is stopped with the reason it deserves, stays
// stopped, and the neighbour loaded before it keeps serving.
func TestHostilePlugins(t *testing.T) {
	neighbour := load(t, "echo", InstanceConfig{Name: "neighbour"})
	initPlugin(t, neighbour, nil)

	cases := []struct {
		name   string
		guest  string
		asm    asmGuest // when guest is "asm"
		opts   InstanceConfig
		config map[string]any
		op     string // where it fails: "init" or "handle"
		reason Reason
		says   string // in the error
	}{
		{"loop in handle", "hostile", asmGuest{}, InstanceConfig{Deadline: 100 * time.Millisecond}, map[string]any{"mode": "loop"}, "handle", ReasonDeadline, "deadline of 100ms"},
		{"loop in init", "hostile", asmGuest{}, InstanceConfig{StartDeadline: 200 * time.Millisecond}, map[string]any{"mode": "loopinit"}, "init", ReasonDeadline, "deadline of 200ms"},
		{"panic", "hostile", asmGuest{}, InstanceConfig{}, map[string]any{"mode": "panic"}, "handle", ReasonTrap, "hostile plugin panics in handle"},
		// Filling 32 MiB takes the guest over a second on a loaded machine:
		// a deadline that must not be what stops it.
		{"memory exhausted", "hostile", asmGuest{}, InstanceConfig{MemoryPages: 512, Deadline: 30 * time.Second}, map[string]any{"mode": "grow"}, "handle", ReasonMemory, "512 memory pages"},
		{"out-of-bounds output pointer", "asm", asmGuest{version: 1, handle: returns(0xfff0_0000, 16)}, InstanceConfig{}, nil, "handle", ReasonBadPointer, "outside the guest memory"},
		{"output running past memory", "asm", asmGuest{version: 1, handle: returns(65536-8, 16)}, InstanceConfig{}, nil, "handle", ReasonBadPointer, "outside the guest memory"},
		{"enormous output length", "asm", asmGuest{version: 1, handle: returns(asmInput, 0xffff_fff0)}, InstanceConfig{}, nil, "handle", ReasonLimit, "over the cap of 4194304 (InstanceConfig.MaxOutput)"},
		{"invalid MsgPack output", "asm", asmGuest{version: 1, handle: returns(asmGarbage, 4)}, InstanceConfig{}, nil, "handle", ReasonBadOutput, "not a valid MsgPack"},
		{"trailing bytes after the output", "asm", asmGuest{version: 1, handle: returns(asmEmpty, 4)}, InstanceConfig{}, nil, "handle", ReasonBadOutput, "bytes after its MsgPack value"},
		{"out-of-bounds import pointer", "asm", asmGuest{version: 1, handle: callLog(0xfff0_0000, 64)}, InstanceConfig{}, nil, "handle", ReasonBadPointer, "kairo.log message"},
		{"trap", "asm", asmGuest{version: 1, handle: []byte{0x00}}, InstanceConfig{}, nil, "handle", ReasonTrap, "unreachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p *Plugin
			if c.guest == "asm" {
				p = loadBytes(t, c.name, c.asm.bytes(), c.opts)
			} else {
				p = load(t, c.guest, c.opts)
			}
			start := time.Now()
			_, err := p.Init(context.Background(), abi.PluginConfig{Config: c.config})
			if c.op == "handle" {
				if err != nil {
					t.Fatalf("init: %v", err)
				}
				_, err = p.Handle(context.Background(), testBatch(1, 8))
			}
			took := time.Since(start)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("err = %v; want a *Failure", err)
			}
			if f.Op != c.op || f.Reason != c.reason || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("failure = op %q reason %q; want %q %q saying %q; error:\n%v", f.Op, f.Reason, c.op, c.reason, c.says, err)
			}
			// Well inside the 30 s deadline: stopped by the fault, not by
			// the deadline; loose, for a loaded machine.
			if took > 15*time.Second {
				t.Errorf("stopping it took %v", took)
			}
			t.Logf("%v (%v)", strings.SplitN(err.Error(), "\n", 2)[0], took.Round(time.Millisecond))

			if p.Err() == nil {
				t.Fatal("Err() = nil after a failure")
			}
			if _, err := p.Handle(context.Background(), testBatch(1, 8)); !errors.Is(err, ErrStopped) {
				t.Fatalf("a call after the failure: %v; want ErrStopped", err)
			}
			if out, err := neighbour.Handle(context.Background(), testBatch(3, 64)); err != nil || len(out.Reply.Actions) != 3 {
				t.Fatalf("the neighbour after %s: %v", c.name, err)
			}
		})
	}
}

// A module the host does not understand is refused at load, with a message
// that says why, and never runs.
func TestRefusedAtLoad(t *testing.T) {
	neighbour := load(t, "echo", InstanceConfig{Name: "neighbour"})
	initPlugin(t, neighbour, nil)

	cases := []struct {
		name string
		wasm []byte
		says string
	}{
		{"wrong ABI version", asmGuest{version: 99}.bytes(), "plugin ABI version 99; this host speaks version 1"},
		{"unknown import", asmGuest{version: 1, extraImport: "spawn_shell"}.bytes(), "imports kairo.spawn_shell, which this host does not provide"},
		{"not wasm", []byte("#!/bin/sh\necho hi\n"), "not a valid WebAssembly module"},
		{"missing exports", nil, "does not export _initialize"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wasm := c.wasm
			if wasm == nil {
				wasm = emptyModule
			}
			_, err := testEngine.Load(context.Background(), wasm, InstanceConfig{Name: c.name})
			var f *Failure
			if !errors.As(err, &f) || f.Reason != ReasonRefused || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v; want refused, saying %q", err, c.says)
			}
			t.Log(err)
			if _, err := neighbour.Handle(context.Background(), testBatch(3, 64)); err != nil {
				t.Fatalf("the neighbour: %v", err)
			}
		})
	}
}

// emptyModule is the smallest valid module: the magic and version 1.
var emptyModule = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// A guest written in WebAssembly, without Go or the SDK, speaks the ABI.
func TestHandAssembledGuest(t *testing.T) {
	p := loadBytes(t, "asm", asmGuest{version: 1}.bytes(), InstanceConfig{})
	if info := initPlugin(t, p, map[string]any{"k": "v"}); info.Name != "asm" {
		t.Fatalf("info = %+v", info)
	}
	for range 3 {
		out, err := p.Handle(context.Background(), testBatch(3, 64))
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Reply.Actions) != 0 || out.Reply.Error != "" {
			t.Fatalf("reply = %+v; want {}", out.Reply)
		}
	}
	// Its input buffer is the rest of its one page; a larger batch does not
	// fit and stops it.
	_, err := p.Handle(context.Background(), testBatch(1, 64<<10))
	var f *Failure
	if !errors.As(err, &f) || f.Reason != ReasonBadPointer || !strings.Contains(err.Error(), "kairo_input returned a buffer") {
		t.Fatalf("err = %v; want a bad_pointer failure", err)
	}
}
