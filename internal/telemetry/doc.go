// Package telemetry makes Kairo visible to an operator's own tools: each
// run loop as an OpenTelemetry trace, made from the event log (traces.go,
// spans.go, export.go), and the daemon's health as Prometheus metrics
// (metrics.go). Both read the log, so an export that was down catches up
// from it, and neither ever slows the agent: the exporter follows the bus
// as any slow subscriber does, from the store when it falls behind.
package telemetry
