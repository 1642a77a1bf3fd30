package abi

import "time"

// TracesExportParams is traces.export: send past run loops to the trace
// receiver again — the ones named, or with none named, every one that
// started at or after Since.
type TracesExportParams struct {
	RunLoops []string  `msgpack:"runLoops,omitempty"`
	Since    time.Time `msgpack:"since,omitempty"`
}

// TracesExportResult says what traces.export sent.
type TracesExportResult struct {
	// Endpoint is the receiver's address, without its path or headers.
	Endpoint string `msgpack:"endpoint"`
	// RunLoops are the run loops found, Open those of them still open
	// (their root span is sent when they end), Missing those named and
	// not found.
	RunLoops []string `msgpack:"runLoops,omitempty"`
	Open     []string `msgpack:"open,omitempty"`
	Missing  []string `msgpack:"missing,omitempty"`
	Spans    int      `msgpack:"spans"`
	Scanned  int      `msgpack:"scanned"`
}
