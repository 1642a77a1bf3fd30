package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kairo-os/kairo/abi"
)

func runTraces(ctx context.Context, args []string) error {
	sub := []command{
		{"export", "send past run loops to the trace receiver again: --run ID, or --since DURATION", runTracesExport},
	}
	if len(args) == 0 {
		return &usageError{msg: "kairo traces needs a command: export", synopsis: "kairo traces export (--run ID ... | --since DURATION)"}
	}
	return dispatch(ctx, sub, "kairo traces", args)
}

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

func runTracesExport(ctx context.Context, args []string) error {
	f := newFlags("traces export", "kairo traces export (--run ID ... | --since DURATION)", `
Send past run loops to the trace receiver of [telemetry] otlp_endpoint
again, as the daemon made them from the log: the run loops --run names
(an id, or its end as kairo runs prints it; the flag may be given more
than once), or every run loop that started in the last --since (such as
30m or 24h). The daemon exports each run loop as it ends on its own; this
is for a receiver that was emptied, or one added later.`)
	var runs repeated
	f.Var(&runs, "run", "a run loop's `ID` (repeatable)")
	since := f.Duration("since", 0, "every run loop that started within this `DURATION`")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var p abi.TracesExportParams
	switch {
	case len(runs) == 0 && *since <= 0:
		return &usageError{msg: "name the run loops (--run ID) or a time (--since 1h)", synopsis: f.synopsis}
	case len(runs) > 0 && *since > 0:
		return &usageError{msg: "--run and --since exclude each other", synopsis: f.synopsis}
	case *since > 0:
		p.Since = time.Now().Add(-*since)
	}
	for _, id := range runs {
		run, ok, err := findRun(ctx, id)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no run loop %q; `kairo runs --all` lists them", id)
		}
		p.RunLoops = append(p.RunLoops, run.ID)
	}
	var res abi.TracesExportResult
	if err := callKernel(ctx, "kairo traces export", abi.MethodTracesExport, p, &res); err != nil {
		return err
	}
	fmt.Printf("sent %d spans of %d run loops to %s (%d events read)\n", res.Spans, len(res.RunLoops), res.Endpoint, res.Scanned)
	for _, id := range res.RunLoops {
		fmt.Printf("  %s  trace %s\n", id, strings.ReplaceAll(id, "-", ""))
	}
	if len(res.Open) > 0 {
		fmt.Printf("%d still open: their root span is sent when they end: %s\n", len(res.Open), strings.Join(res.Open, ", "))
	}
	if len(res.Missing) > 0 {
		return fmt.Errorf("kairo traces export: %d run loops not found in the log: %s", len(res.Missing), strings.Join(res.Missing, ", "))
	}
	return nil
}
