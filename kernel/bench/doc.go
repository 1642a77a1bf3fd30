// Package bench holds the kernel's speed benchmarks in one place, so one
// command prints every figure:
//
//	go test -run '^$' -bench . ./kernel/bench/
//
// Each benchmark reports its figure with b.ReportMetric: events/s for the
// bus and push paths, p50-us for the socket round trip.
package bench
