package wasm

import (
	"github.com/tetratelabs/wazero"
)

// WASI is what a plugin reaches through WASI, from its manifest's
// [grants.wasi] as the operator narrowed it. The zero value gives no files
// and no environment.
type WASI struct {
	// FS lists host folders the plugin may read, each mounted read-only at
	// the same path inside the guest.
	FS []string
	// Env lists variables copied from the host's environment, if set.
	Env []string
	// LookupEnv reads the host's environment; nil uses no variable at all.
	LookupEnv func(string) (string, bool)
}

// apply grants w in cfg: read-only mounts and the listed variables.
func (w WASI) apply(cfg wazero.ModuleConfig) wazero.ModuleConfig {
	if len(w.FS) > 0 {
		fs := wazero.NewFSConfig()
		for _, dir := range w.FS {
			fs = fs.WithReadOnlyDirMount(dir, dir)
		}
		cfg = cfg.WithFSConfig(fs)
	}
	if w.LookupEnv != nil {
		for _, name := range w.Env {
			if v, ok := w.LookupEnv(name); ok {
				cfg = cfg.WithEnv(name, v)
			}
		}
	}
	return cfg
}
