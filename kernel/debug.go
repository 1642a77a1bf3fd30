package kernel

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// debugHeap is debug.heap: the daemon's heap profile, for the operator
// alone, as what the heap holds says what the daemon was asked.
func (k *Kernel) debugHeap(_ context.Context, c *Call) (any, error) {
	if caller := c.Session.Caller(); caller.Kind != KindOperator || caller.Grants != nil {
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: %s is the operator's alone; %s may not read the daemon's heap", abi.MethodDebugHeap, caller)
	}
	var p abi.DebugHeapParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if p.GC {
		runtime.GC()
	}
	w := &cappedBuffer{max: abi.MaxHeapProfile}
	if err := pprof.WriteHeapProfile(w); err != nil {
		if errors.Is(err, errProfileCap) {
			return nil, abi.Errorf(abi.CodeUnavailable, "%s: the heap profile passed %d bytes (abi.MaxHeapProfile), more than one answer carries; kairo status shows the heap in use", abi.MethodDebugHeap, abi.MaxHeapProfile)
		}
		return nil, abi.Errorf(abi.CodeInternal, "%s: %v", abi.MethodDebugHeap, err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return abi.DebugHeapResult{Profile: w.b, HeapBytes: ms.HeapAlloc, Time: time.Now()}, nil
}

var errProfileCap = fmt.Errorf("over abi.MaxHeapProfile")

// cappedBuffer keeps at most max bytes and fails the write that would pass
// them.
type cappedBuffer struct {
	b   []byte
	max int
}

func (w *cappedBuffer) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > w.max {
		return 0, errProfileCap
	}
	w.b = append(w.b, p...)
	return len(p), nil
}
