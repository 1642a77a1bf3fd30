package wasm

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/internal/meter"
)

// wantDeadline checks that err is a deadline Failure of op, reached no
// sooner than the deadline and well before a guest that nothing stops would
// end.
func wantDeadline(t *testing.T, err error, op string, deadline, took time.Duration) {
	t.Helper()
	var f *Failure
	if !errors.As(err, &f) || f.Op != op || f.Reason != ReasonDeadline || !strings.Contains(err.Error(), "deadline of "+deadline.String()) {
		t.Fatalf("err = %v; want a deadline Failure of %s", err, op)
	}
	if took < deadline || took > deadline+2*time.Second {
		t.Errorf("stopped after %v; want just past %v", took, deadline)
	}
}

// Each runaway guest is stopped at its deadline by the checks the meter
// wrote into it; the same guest asked for a finite amount of work completes
// under the same checks.
func TestMeterStopsRunaways(t *testing.T) {
	const forever = 1 << 62 // passes: over a century at one per nanosecond
	const deadline = 100 * time.Millisecond
	cases := []struct {
		name             string
		runaway, control loopGuest
		op               string
	}{
		{"tight loop", loopGuest{handle: countTo(1, forever)}, loopGuest{handle: countTo(1, 1000)}, "handle"},
		{"loop in a loop", loopGuest{handle: nestedLoops(1, 2, forever, 1000)}, loopGuest{handle: nestedLoops(1, 2, 10, 1000)}, "handle"},
		{"recursion without a loop", loopGuest{handle: callWork(62), work: doubling}, loopGuest{handle: callWork(10), work: doubling}, "handle"},
		{"loop in _initialize", loopGuest{initialize: countTo(0, forever)}, loopGuest{initialize: countTo(0, 1000)}, abi.ExportInitialize},
		// The start section's function runs as the module is instantiated.
		{"loop in the start function", loopGuest{start: countTo(0, forever)}, loopGuest{start: countTo(0, 1000)}, "load"},
	}
	opts := InstanceConfig{Deadline: deadline, StartDeadline: deadline}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctl := loadBytes(t, c.name+" control", c.control.bytes(), opts)
			if !ctl.metered {
				t.Fatal("the control is not metered")
			}
			initPlugin(t, ctl, nil)
			for range 3 {
				if _, err := ctl.Handle(context.Background(), testBatch(1, 8)); err != nil {
					t.Fatalf("control: %v", err)
				}
			}

			start := time.Now()
			p, err := testEngine.Load(context.Background(), c.runaway.bytes(), opts)
			if c.op != "handle" {
				wantDeadline(t, err, c.op, deadline, time.Since(start))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			initPlugin(t, p, nil)
			start = time.Now()
			_, err = p.Handle(context.Background(), testBatch(1, 8))
			wantDeadline(t, err, c.op, deadline, time.Since(start))
			if _, err := p.Handle(context.Background(), testBatch(1, 8)); !errors.Is(err, ErrStopped) {
				t.Fatalf("a call after the failure: %v; want ErrStopped", err)
			}
		})
	}
}

// A Go guest that sleeps waits in WASI poll_oneoff and reads the clock in a
// loop (wazero's clocks are fake, so it never blocks the host); it is
// stopped at its deadline. A short sleep completes.
func TestMeterStopsASleepingGuest(t *testing.T) {
	const deadline = 200 * time.Millisecond
	ctl := load(t, "meter_sleep", InstanceConfig{Deadline: deadline})
	initPlugin(t, ctl, map[string]any{"sleep": "1ms"})
	if out, err := ctl.Handle(context.Background(), testBatch(0, 0)); err != nil || !strings.HasPrefix(out.Reply.Thought, "slept") {
		t.Fatalf("control: %+v, %v", out.Reply, err)
	}

	p := load(t, "meter_sleep", InstanceConfig{Deadline: deadline})
	initPlugin(t, p, map[string]any{"sleep": "1h"})
	start := time.Now()
	_, err := p.Handle(context.Background(), testBatch(0, 0))
	wantDeadline(t, err, "handle", deadline, time.Since(start))
}

// Native wasm code never yields to the Go scheduler, and a garbage
// collection waits for every goroutine: were the guests not to leave native
// code through yield, a GC starting while they loop would stop the world
// around them, deadline timers included, until they ended by themselves.
// Here as many guests as there are Ps loop at once while the test collects
// garbage; each is stopped at its deadline.
func TestMeterStopsLoopsDuringGC(t *testing.T) {
	const deadline = 200 * time.Millisecond
	// 2^34 passes take seconds: were the mechanism broken, the test fails
	// instead of hanging.
	wasm := loopGuest{handle: countTo(1, 1<<34)}.bytes()
	n := max(runtime.GOMAXPROCS(0), 2)
	ps := make([]*Plugin, n)
	for i := range ps {
		ps[i] = loadBytes(t, "gc loop", wasm, InstanceConfig{Deadline: deadline})
		initPlugin(t, ps[i], nil)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				runtime.GC()
			}
		}
	})
	var guests sync.WaitGroup
	for _, p := range ps {
		guests.Go(func() {
			start := time.Now()
			_, err := p.Handle(context.Background(), testBatch(0, 0))
			wantDeadline(t, err, "handle", deadline, time.Since(start))
		})
	}
	guests.Wait()
	close(stop)
	wg.Wait()
}

// With a single P, the deadline timer runs only when the looping guest's
// goroutine gives the P up: the scheduler asks it to after 10 ms, and it
// does at its next yield.
func TestMeterStopsALoopOnOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const deadline = 100 * time.Millisecond
	p := loadBytes(t, "one P", loopGuest{handle: countTo(1, 1<<34)}.bytes(), InstanceConfig{Deadline: deadline})
	initPlugin(t, p, nil)
	start := time.Now()
	_, err := p.Handle(context.Background(), testBatch(0, 0))
	wantDeadline(t, err, "handle", deadline, time.Since(start))
}

// A module the meter will not rewrite (here: it exports a name the meter
// reserves) runs under wazero's close-on-context-done, never unenforced.
func TestMeterFallback(t *testing.T) {
	const deadline = 100 * time.Millisecond
	ctl := loadBytes(t, "fallback control", loopGuest{handle: countTo(1, 1000), exportName: meter.ExportFuel}.bytes(), InstanceConfig{Deadline: deadline})
	if ctl.metered {
		t.Fatal("the module was metered")
	}
	initPlugin(t, ctl, nil)
	if _, err := ctl.Handle(context.Background(), testBatch(1, 8)); err != nil {
		t.Fatalf("control: %v", err)
	}

	p := loadBytes(t, "fallback", loopGuest{handle: countTo(1, 1<<62), exportName: meter.ExportFuel}.bytes(), InstanceConfig{Deadline: deadline})
	initPlugin(t, p, nil)
	start := time.Now()
	_, err := p.Handle(context.Background(), testBatch(1, 8))
	wantDeadline(t, err, "handle", deadline, time.Since(start))
}

// A module on which wazero's validator panics is refused, trusted or not,
// and the host lives on.
func TestModuleThatPanicsWazeroIsRefused(t *testing.T) {
	// Two functions of type () -> (); the second declares type 9, which
	// does not exist, and the first calls it.
	wasm := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	wasm = section(wasm, 1, []byte{1, 0x60, 0, 0})
	wasm = section(wasm, 3, []byte{2, 0, 9})
	wasm = section(wasm, 10, []byte{2, 4, 0, 0x10, 0x01, 0x0b, 2, 0, 0x0b})
	for _, trusted := range []bool{false, true} {
		_, err := testEngine.Load(context.Background(), wasm, InstanceConfig{Name: "panics", Trusted: trusted})
		var f *Failure
		if !errors.As(err, &f) || f.Reason != ReasonRefused || !strings.Contains(err.Error(), "not a valid WebAssembly module") {
			t.Fatalf("trusted=%v: err = %v; want refused", trusted, err)
		}
	}
}
