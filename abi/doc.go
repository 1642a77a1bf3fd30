// Package abi holds Kairo's wire types: the event envelope, the IPC frame and
// packets, and the parameters and results of the kernel methods. The host, the
// plugin SDK and every IPC client import these types; nobody copies them.
//
// The package builds for GOOS=wasip1 so plugins can import it, and depends on
// nothing but msgpack.
package abi

// Version is the ABI version. It changes when a wire type changes in a way an
// older peer cannot read; adding an optional field does not change it.
const Version = 1
