package wasm

import (
	"errors"
	"fmt"
)

// Reason says why a plugin instance was stopped or refused. The values are
// the reasons of the kairo.plugin.failed event.
type Reason string

// The reasons.
const (
	// ReasonRefused: the module does not speak the ABI the host knows (its
	// version, its imports or its exports); it was never run.
	ReasonRefused Reason = "refused"
	// ReasonDeadline: a call ran past its deadline and was stopped.
	ReasonDeadline Reason = "deadline"
	// ReasonTrap: the guest trapped (unreachable, out-of-bounds access, a
	// stack overflow), as a Go guest does when it panics.
	ReasonTrap Reason = "trap"
	// ReasonExit: the guest called proc_exit.
	ReasonExit Reason = "exit"
	// ReasonMemory: the guest exhausted the memory pages it may use.
	ReasonMemory Reason = "memory"
	// ReasonBadPointer: a pointer and length the guest passed or returned
	// fall outside its memory or the host's limits.
	ReasonBadPointer Reason = "bad_pointer"
	// ReasonBadOutput: the guest's output is not the MsgPack the ABI asks.
	ReasonBadOutput Reason = "bad_output"
	// ReasonInit: the plugin's Init reported an error.
	ReasonInit Reason = "init"
	// ReasonLimit: the plugin asked the host for more than a cap allows
	// (the bytes of a call's arguments, of an event, of a batch's output;
	// the actions of a reply); the error is a [*CapError] naming the cap.
	ReasonLimit Reason = "limit"
)

// ErrStopped is wrapped by the error of every call to a plugin instance that
// has already failed: it is dead until it is loaded again.
var ErrStopped = errors.New("plugin instance stopped")

// Failure is the error of a plugin instance that was stopped or refused.
type Failure struct {
	Plugin string // the name given at load
	Op     string // what the host was doing: "load", "_initialize", "init", "handle"
	Reason Reason
	Err    error
	// Stderr is the tail of what the guest wrote to stderr, where a Go
	// guest writes its panic.
	Stderr string
}

// Error says which plugin failed, in which call, why, and what the guest
// wrote to stderr (for a native plugin, the panic's stack).
func (f *Failure) Error() string {
	msg := fmt.Sprintf("plugin %s: %s: %s: %v", f.Plugin, f.Op, f.Reason, f.Err)
	if f.Stderr != "" {
		msg += "\nguest stderr:\n" + f.Stderr
	}
	return msg
}

// Unwrap returns the cause, so [errors.As] finds a [CapError] in it.
func (f *Failure) Unwrap() error { return f.Err }

// boundsError is the panic of a host function that was given a range
// outside the guest's memory; wazero turns the panic into the call's error.
type boundsError struct {
	what     string
	ptr, n   uint32
	memBytes uint32
}

func (e *boundsError) Error() string {
	return fmt.Sprintf("%s: %d bytes at %#x are outside the guest memory of %d bytes", e.what, e.n, e.ptr, e.memBytes)
}

// CapError is a plugin going past a cap the host holds it to: what the host
// would have had to copy, keep or allocate for it, over the bound.
type CapError struct {
	What string // what went past the cap: "kairo.call args", "output"
	Got  int64
	Max  int64
	Unit string // "bytes", "actions", ...
	Cap  string // the bound, as its owner names it: "InstanceConfig.MaxCallArgs"
}

// Error names what was over which cap, and by how much.
func (e *CapError) Error() string {
	return fmt.Sprintf("%s: %d %s, over the cap of %d (%s)", e.What, e.Got, e.Unit, e.Max, e.Cap)
}
