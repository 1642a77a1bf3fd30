// Package abi is Kairo's wire vocabulary: the event envelope, the IPC frame
// and packets, the names of the kernel's methods ([MethodKernelPing] …) and
// subjects ([SubjectAll] …), the params and results of every method
// (memory and agent.replay included), the data of the events the kernel
// and the host publish, the subject grammar ([ValidateSubject],
// [CompilePattern], [Covers]), event ids ([NewID], [ScopeEventID]), and,
// in package [github.com/kairo-os/kairo/abi/modelname], the names a model
// is offered the agent's tools under.
//
// The host, the plugin SDK and every IPC client import these types, so a
// client, a plugin and the kernel spell each name once. Packages that use a
// type a lot may give it a short name of their own (internal/memory's
// Anchor is an alias of [MemoryAnchor]); an alias is the same type, not a
// copy. One exception remains: the data of the store's events
// (kairo.system.store.*) is still declared beside the stores in
// kernel/bus. See docs/RATIONALE.md#one-vocabulary.
//
// The package builds for GOOS=wasip1 so plugins can import it, and depends on
// nothing but msgpack.
package abi

// Version is the ABI version. It changes when a wire type changes in a way an
// older peer cannot read; adding an optional field does not change it.
const Version = 1
