package wasm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/manifests"
)

// Inspection is what [Inspect] learned of a module, for `kairo plugin
// inspect`: enough to tell why the host would refuse it.
type Inspection struct {
	File string
	Size int
	// ABIVersion is what kairo_abi_version returned, 0 when it could not
	// be run (VersionError says why).
	ABIVersion   int32
	VersionError string
	Exports      []Symbol
	Imports      []Symbol
	// Manifest is the plugin's manifest, or nil (ManifestError says why).
	Manifest      *manifests.Plugin
	ManifestError string
	// Problems are what keeps the host from loading the module.
	Problems []string
}

// Symbol is one import or export.
type Symbol struct {
	Module string // of an import
	Name   string
	Kind   string // "func" or "memory"
	Type   string // "(i32) -> (i64)" for a function
}

// Inspect reads the module at path and its manifest, lists its imports and
// exports, checks them against the ABI, and runs _initialize and
// kairo_abi_version (under a deadline, with every host function refusing)
// to learn the version it speaks.
func Inspect(ctx context.Context, path string) (*Inspection, error) {
	man, wasm, err := ReadPlugin(path)
	if wasm == nil {
		return nil, err
	}
	in := &Inspection{File: path, Size: len(wasm), Manifest: man}
	if err != nil {
		in.ManifestError = err.Error()
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer rt.Close(context.Background())
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid WebAssembly module: %w", path, err)
	}
	for _, f := range compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		in.Imports = append(in.Imports, Symbol{Module: mod, Name: name, Kind: "func", Type: sig(f.ParamTypes(), f.ResultTypes())})
	}
	for _, m := range compiled.ImportedMemories() {
		mod, name, _ := m.Import()
		in.Imports = append(in.Imports, Symbol{Module: mod, Name: name, Kind: "memory"})
	}
	for name, f := range compiled.ExportedFunctions() {
		in.Exports = append(in.Exports, Symbol{Name: name, Kind: "func", Type: sig(f.ParamTypes(), f.ResultTypes())})
	}
	for name := range compiled.ExportedMemories() {
		in.Exports = append(in.Exports, Symbol{Name: name, Kind: "memory"})
	}
	slices.SortFunc(in.Exports, func(a, b Symbol) int { return strings.Compare(a.Name, b.Name) })
	for _, err := range []error{checkImports(compiled, false), checkExports(compiled)} {
		if err != nil {
			in.Problems = append(in.Problems, err.Error())
		}
	}
	if len(in.Problems) > 0 {
		in.VersionError = "not run: the module does not speak the ABI"
		return in, nil
	}

	v, err := abiVersion(ctx, rt, compiled)
	if err != nil {
		in.VersionError = err.Error()
		in.Problems = append(in.Problems, "kairo_abi_version: "+err.Error())
		return in, nil
	}
	in.ABIVersion = v
	if v != abi.PluginABIVersion {
		in.Problems = append(in.Problems, fmt.Sprintf("the module speaks plugin ABI version %d; this host speaks version %d", v, abi.PluginABIVersion))
	}
	return in, nil
}

// abiVersion instantiates the module with stub host functions and asks it
// its version.
func abiVersion(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return 0, err
	}
	b := rt.NewHostModuleBuilder(abi.HostModule)
	for name, f := range hostFuncs {
		results := len(f.results)
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			if results > 0 {
				stack[0] = api.EncodeI32(int32(abi.ErrnoNotGranted))
			}
		}), f.params, f.results).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return 0, err
	}
	mod, err := rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		return 0, err
	}
	if _, err := mod.ExportedFunction(abi.ExportInitialize).Call(ctx); err != nil {
		return 0, fmt.Errorf("_initialize: %w", err)
	}
	res, err := mod.ExportedFunction(abi.ExportABIVersion).Call(ctx)
	if err != nil {
		return 0, err
	}
	return int32(res[0]), nil
}
