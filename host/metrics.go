package host

import (
	"context"
	"time"

	"github.com/kairo-os/kairo/internal/telemetry"
	"github.com/kairo-os/kairo/manifests"
)

// startMetrics serves /metrics when [telemetry] metrics_listen is set: the
// daemon's health, counted from the events the bus delivers and read from
// its parts at each scrape.
func (d *Daemon) startMetrics(home string, cfg manifests.Config) error {
	tc := cfg.Telemetry
	if tc.MetricsListen == "" {
		return nil
	}
	m, err := telemetry.NewMetrics(telemetry.MetricsConfig{
		Bus: d.bus, Kernel: d.kernel, Tools: d.toolNames, Plugins: d.pluginNames,
		Models: []string{cfg.LLM.Model}, Agents: d.agentHealth, Logger: d.log,
	})
	if err != nil {
		return err
	}
	if err := m.Serve(tc.MetricsListen, tc.AllowRemote); err != nil {
		m.Close(context.Background())
		return err
	}
	d.metrics = m
	d.log.Info("metrics at http://"+m.Addr().String()+"/metrics", "listen", m.Addr().String())
	return nil
}

func (d *Daemon) stopMetrics() {
	if d.metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.metrics.Close(ctx); err != nil {
		d.log.Warn("close the metrics endpoint", "err", err)
	}
}

// MetricsAddr is the address /metrics is served on, HOST:PORT; "" when
// [telemetry] metrics_listen is off or the daemon is not up.
func (d *Daemon) MetricsAddr() string {
	if d.metrics == nil || d.metrics.Addr() == nil {
		return ""
	}
	return d.metrics.Addr().String()
}

// Metrics are the daemon's metrics, nil when [telemetry] metrics_listen is
// off: the trace export registers its own collectors in their Registry.
func (d *Daemon) Metrics() *telemetry.Metrics { return d.metrics }

func (d *Daemon) toolNames() []string {
	if d.tools == nil {
		return nil
	}
	var out []string
	for _, t := range d.tools.List() {
		out = append(out, t.Name)
	}
	return out
}

func (d *Daemon) pluginNames() []string {
	var out []string
	for _, p := range d.Plugins() {
		out = append(out, p.Name)
	}
	return out
}

func (d *Daemon) agentHealth() []telemetry.AgentHealth {
	out := make([]telemetry.AgentHealth, 0, len(d.agents))
	for _, r := range d.agents {
		h := r.Health()
		out = append(out, telemetry.AgentHealth{Agent: h.Agent, Open: h.Open, Interrupted: h.Interrupted, Ticks: h.Ticks, Skipped: h.Skipped, TickLag: h.TickLag})
	}
	return out
}
