// Package jetstream is the event store on NATS JetStream, for a log that
// outlives or outgrows one machine: on a server kairo starts inside
// itself (embedded) or on an existing cluster that several hosts share.
// Importing the package registers it with [bus.Register] as kind
// "jetstream" and links the NATS server; a program that does not import
// it does not. [Open] opens a store without the registry; [Apply] and
// [HostPermissions] serve `kairo store apply` and `kairo store
// permissions`.
//
// Why JetStream: docs/RATIONALE.md#jetstream-for-more-than-one-machine.
// How several hosts append to one stream and each reads whose each event
// is: docs/RATIONALE.md#several-writers-on-one-stream and
// docs/RATIONALE.md#several-hosts-one-log.
package jetstream
