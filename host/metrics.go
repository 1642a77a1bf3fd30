package host

import "github.com/kairo-os/kairo/manifests"

// startMetrics serves /metrics when [telemetry] metrics_listen is set.
func (d *Daemon) startMetrics(home string, cfg manifests.Config) error { return nil }

func (d *Daemon) stopMetrics() {}
