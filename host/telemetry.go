package host

import "github.com/kairo-os/kairo/manifests"

// startTelemetry starts what [telemetry] turns on: the metrics endpoint and
// the trace export. Both follow the log; neither is on the agent's path.
func (d *Daemon) startTelemetry(home string, cfg manifests.Config) error {
	if err := d.startMetrics(home, cfg); err != nil {
		return err
	}
	return d.startTraces(home, cfg)
}

// stopTelemetry stops them, before the bus closes.
func (d *Daemon) stopTelemetry() {
	d.stopTraces()
	d.stopMetrics()
}
