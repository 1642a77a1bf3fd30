package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/telemetry"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/manifests"
)

// tracesState is the trace export's place in the log, in the data folder.
const tracesState = "traces.json"

// startTraces exports the run loops as traces when [telemetry]
// otlp_endpoint is set, and serves traces.export either way (which says
// how to turn it on when it is off).
func (d *Daemon) startTraces(home string, cfg manifests.Config) error {
	d.kernel.Register(kernel.Method{Name: abi.MethodTracesExport, Summary: "send past run loops to the trace receiver again, for the operator", Handler: d.tracesExport})
	tc := cfg.Telemetry
	if tc.OTLPEndpoint == "" {
		return nil
	}
	headers, err := d.otlpHeaders(tc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.traces, err = telemetry.FollowOTLP(ctx, d.bus, tc, headers, d.cfg.Version, filepath.Join(home, tracesState), d.log.With("part", "traces"))
	if err != nil {
		return err
	}
	if d.metrics != nil {
		for _, c := range d.traces.Collectors() {
			if err := d.metrics.Registry().Register(c); err != nil {
				return fmt.Errorf("register the trace export's metrics: %w", err)
			}
		}
	}
	d.traces.Start()
	d.log.Info("traces go to " + telemetry.RedactURL(tc.OTLPEndpoint) + " (OTLP " + tc.Protocol() + ")")
	return nil
}

func (d *Daemon) stopTraces() {
	if d.traces != nil {
		d.traces.Stop()
	}
}

// otlpHeaders are [telemetry] otlp_headers with their secret handles read
// from the store; the values join the kernel's mask.
func (d *Daemon) otlpHeaders(tc manifests.TelemetryConfig) (map[string]string, error) {
	headers := make(map[string]string, len(tc.OTLPHeaders))
	for k, v := range tc.OTLPHeaders {
		name, ok := strings.CutPrefix(v, "secret:")
		if !ok {
			headers[k] = v
			continue
		}
		if d.vault == nil {
			return nil, fmt.Errorf("[telemetry] otlp_headers.%s names the secret %q, but there is no secret store", k, name)
		}
		val, err := d.vault.Get(name)
		if err != nil {
			return nil, fmt.Errorf("[telemetry] otlp_headers.%s: %w (set it with: kairo secrets set %s)", k, err, name)
		}
		if _, err := d.kernel.Masker().Add(name, val); err != nil {
			return nil, fmt.Errorf("[telemetry] otlp_headers.%s: %w", k, err)
		}
		headers[k] = string(val)
	}
	return headers, nil
}

// tracesExport answers traces.export: to the operator alone, since it
// sends what the log holds to the receiver the operator configured.
func (d *Daemon) tracesExport(ctx context.Context, c *kernel.Call) (any, error) {
	if caller := c.Session.Caller(); caller.Kind != kernel.KindOperator || caller.Grants != nil {
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: %s may not export traces; only the operator may", caller)
	}
	var p abi.TracesExportParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	tc := d.cfg.Config.Telemetry
	if tc.OTLPEndpoint == "" {
		return nil, abi.Errorf(abi.CodeUnavailable, "traces are off: set [telemetry] otlp_endpoint = \"http://127.0.0.1:4318\" in kairo.toml and restart kairo up")
	}
	if len(p.RunLoops) == 0 && p.Since.IsZero() {
		return nil, abi.Errorf(abi.CodeInvalidParams, "name the run loops to export, or since when")
	}
	if len(p.RunLoops) > 1000 {
		return nil, abi.Errorf(abi.CodeInvalidParams, "%d run loops: export at most 1000 at once", len(p.RunLoops))
	}
	got, err := telemetry.Collect(ctx, d.bus, p.RunLoops, p.Since)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInvalidParams, "read the log: %v", err)
	}
	headers, err := d.otlpHeaders(tc)
	if err != nil {
		return nil, err
	}
	exp, err := telemetry.OTLP(ctx, tc, headers)
	if err != nil {
		return nil, err
	}
	defer exp.Stop(context.WithoutCancel(ctx))
	res := abi.TracesExportResult{Endpoint: telemetry.RedactURL(tc.OTLPEndpoint), RunLoops: got.Loops, Open: got.Open, Spans: len(got.Spans), Scanned: got.Scanned}
	found := map[string]bool{}
	for _, id := range got.Loops {
		found[id] = true
	}
	for _, id := range p.RunLoops {
		if !found[id] {
			res.Missing = append(res.Missing, id)
		}
	}
	if err := telemetry.Send(ctx, exp, telemetry.ServiceResource(tc.Service(), d.cfg.Version, d.bus.Host()), got.Spans); err != nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "send the spans to %s: %v", res.Endpoint, err)
	}
	return res, nil
}
