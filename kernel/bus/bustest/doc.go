// Package bustest holds what the tests of the bus and of its store
// drivers share, as net/nettest does for net.Conn implementations: the
// conformance suite every [bus.Store] passes ([Conform]) and helpers that
// publish, subscribe and read through the exported API.
package bustest
