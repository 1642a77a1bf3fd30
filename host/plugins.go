package host

import (
	"os"
	"path/filepath"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/plugins"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// startPlugins loads the plugins: the built-ins beside the kairo binary, then
// the drop-in folder, and follows the drop-in folder for changes.
func (d *Daemon) startPlugins(home string, cfg manifests.Config) error {
	folders := pluginFolders(home, cfg)
	builtins := builtinsOf(cfg, d.cfg.Builtins)
	d.plugins = wasm.NewManager(wasm.ManagerConfig{
		Engine: d.engine, Kernel: d.kernel, Folders: folders, Builtins: builtins, Overrides: cfg.Plugins,
		Deadline: cfg.PluginLimits.DeadlineDuration(), MemoryPages: uint32(cfg.PluginLimits.Memory / manifests.WasmPageSize),
		MaxDeadline: cfg.PluginLimits.MaxDeadlineDuration(), MaxMemoryPages: uint32(cfg.PluginLimits.MaxMemory / manifests.WasmPageSize), Public: cfg.PluginLimits.Public,
		MaxFailures: cfg.PluginLimits.MaxFailures, FailureWindow: cfg.PluginLimits.FailureWindowDuration(),
		Watch: true, Checkpoints: cfg.CheckpointsDir(home), Logger: d.log,
	})
	d.progress(Progress{Step: StepPlugins, Folders: folders, Cache: cfg.CachePath(home)})
	if err := d.plugins.Start(); err != nil {
		d.log.Warn("plugins load, but changes to their files need a restart", "err", err)
	}
	// The manager has a unit for every plugin it found, built in or in a
	// folder, running or not: an override of none of them names nothing.
	list := d.plugins.List()
	installed := map[string]bool{}
	n := 0
	for _, p := range list {
		installed[p.Name] = true
		if p.State == abi.PluginRunning {
			n++
		}
	}
	for name := range cfg.Plugins {
		if !installed[name] {
			d.log.Warn("kairo.toml has [plugins."+name+"], but no plugin of that name is installed", "folders", folders)
		}
	}
	d.log.Info("plugins loaded", "running", n, "of", len(list))
	d.progress(Progress{Step: StepAgent})
	return nil
}

// startEngine starts the plugin engine, which compiles the modules
// through the data folder's cache.
func (d *Daemon) startEngine(home string, cfg manifests.Config) error {
	h, err := wasm.NewEngine(wasm.EngineConfig{CacheDir: cfg.CachePath(home), Logger: d.log})
	if err != nil {
		return err
	}
	d.engine = h
	return nil
}

// builtinsOf are the plugins compiled in that cfg runs: own, or nil for
// Kairo's; none with [host] builtins = false.
func builtinsOf(cfg manifests.Config, own []plugin.Builtin) []plugin.Builtin {
	switch {
	case !cfg.Host.Builtins:
		return nil
	case own != nil:
		return own
	}
	return plugins.Builtins()
}

// pluginFolders are where the plugins of a daemon on home are: the
// built-ins beside the running binary, then the drop-in folder.
func pluginFolders(home string, cfg manifests.Config) []wasm.Folder {
	var folders []wasm.Folder
	if cfg.Host.Builtins {
		if exe, err := os.Executable(); err == nil {
			folders = append(folders, wasm.Folder{Path: filepath.Join(filepath.Dir(exe), "plugins"), Builtin: true})
		}
	}
	return append(folders, wasm.Folder{Path: cfg.PluginsPath(home)})
}
