package wasm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// The instance's deadline timer is re-armed for every call: many calls, each
// well within the deadline, together far past it, all succeed.
// The deadline leaves room for a call to wait for a CPU on a loaded
// machine; the calls take microseconds each.
func TestDeadlineIsPerCall(t *testing.T) {
	// A race-detector run beside other packages' tests on two cores has
	// kept a call off the CPU for over 200 ms.
	p := load(t, "echo", InstanceConfig{Deadline: time.Second})
	initPlugin(t, p, map[string]any{"publish": false})
	start := time.Now()
	for time.Since(start) < 2500*time.Millisecond {
		if out, err := p.Handle(context.Background(), testBatch(3, 64)); err != nil || len(out.Reply.Actions) != 3 {
			t.Fatalf("after %v: %v, %d actions", time.Since(start), err, len(out.Reply.Actions))
		}
	}
}

// A caller that can cancel stops a looping plugin by cancelling, long
// before the plugin's own deadline, and the failure says why.
func TestCallerCancelStopsPlugin(t *testing.T) {
	p := load(t, "hostile", InstanceConfig{Deadline: time.Minute})
	initPlugin(t, p, map[string]any{"mode": "loop"})
	cause := errors.New("the operator stopped the run")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	_, err := p.Handle(ctx, testBatch(1, 8))
	var f *Failure
	if !errors.As(err, &f) || f.Reason != ReasonDeadline || !strings.Contains(err.Error(), cause.Error()) {
		t.Fatalf("err = %v; want a deadline Failure naming the cause", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stopping it took %v", took)
	}
	if _, err := p.Handle(context.Background(), &abi.Batch{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("a call after the failure: %v; want ErrStopped", err)
	}
}
