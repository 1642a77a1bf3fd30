// Command meter_sleep is a plugin that sleeps in every Handle for the
// duration its config names ({"sleep": "1h"}), as a Go guest sleeps: the Go
// runtime waits in WASI poll_oneoff and reads the clock until the time has
// passed.
package main

import (
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() { plugin.Register(plugin.Plugin{Init: setup, Handle: handle}) }

func main() {}

var sleep time.Duration

func setup(cfg abi.PluginConfig) (abi.PluginInfo, error) {
	s, _ := cfg.Config["sleep"].(string)
	d, err := time.ParseDuration(s)
	if err != nil {
		return abi.PluginInfo{}, err
	}
	sleep = d
	return abi.PluginInfo{Name: "meter_sleep"}, nil
}

func handle(*abi.Batch) (abi.Reply, error) {
	start := time.Now()
	time.Sleep(sleep)
	return abi.Reply{Thought: "slept " + time.Since(start).String()}, nil
}
