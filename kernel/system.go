package kernel

import (
	"context"
	"runtime"
	"time"

	"github.com/kairo-os/kairo/abi"
)

func (k *Kernel) registerSystem() {
	k.Register(Method{Name: abi.MethodKernelPing, Summary: "answer with the kernel's time", Quick: true, Handler: func(context.Context, *Call) (any, error) {
		return abi.PingResult{Time: time.Now(), Ready: k.ready.Load()}, nil
	}})
	k.Register(Method{Name: abi.MethodKernelIntrospect, Summary: "list the methods and the ABI version", Quick: true, Handler: func(context.Context, *Call) (any, error) {
		return abi.IntrospectResult{ABIVersion: abi.Version, Version: k.opts.Version, Host: k.opts.Host, Methods: k.Methods()}, nil
	}})
	k.Register(Method{Name: abi.MethodClockWait, Summary: "answer at a time to come (a timer for plugins, whose call answers asynchronously)", Handler: clockWait})
	k.Register(Method{Name: abi.MethodSystemMetrics, Summary: "the kernel's counters", Handler: func(context.Context, *Call) (any, error) {
		return k.Metrics(), nil
	}})
	k.Register(Method{Name: abi.MethodDebugHeap, Summary: "the daemon's heap profile, for go tool pprof (operator only)", Handler: k.debugHeap})
}

// maxClockWait bounds one clock.wait; a caller waiting longer asks again.
const maxClockWait = 24 * time.Hour

func clockWait(ctx context.Context, c *Call) (any, error) {
	var p abi.ClockWaitParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if p.Until.IsZero() {
		return nil, abi.Errorf(abi.CodeInvalidParams, "%s: give until, the time to answer at", abi.MethodClockWait)
	}
	d := time.Until(p.Until)
	if d > maxClockWait {
		return nil, abi.Errorf(abi.CodeInvalidParams, "%s: %s is more than %v away; wait in steps", abi.MethodClockWait, p.Until.Format(time.RFC3339), maxClockWait)
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return abi.ClockWaitResult{Now: time.Now()}, nil
}

// Metrics gathers the kernel's counters.
func (k *Kernel) Metrics() abi.Metrics {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := k.Bus.Stats()
	m := abi.Metrics{
		Uptime:        time.Since(k.started),
		Goroutines:    runtime.NumGoroutine(),
		HeapBytes:     ms.HeapAlloc,
		Subscriptions: st.Subscriptions,
		LastSeq:       k.Bus.LastSeq(),
		Published:     st.Published,
		Duplicates:    st.Duplicates,
		Delivered:     st.Delivered,
		CatchUps:      st.CatchUps,
		Requests:      k.requests.Load(),
		Store:         k.Bus.Store().Describe(),
	}
	m.StoreFullSince, m.StoreRefused = k.Bus.Full()
	m.StoreUnreachableSince, m.StoreUnreachableRefused = k.Bus.Unreachable()
	if f, ok := k.gauges.Load("connections"); ok {
		m.Connections = f.(func() int)()
	}
	if f, ok := k.gauges.Load("badFrames"); ok {
		m.BadFrames = uint64(f.(func() int)())
	}
	return m
}
