package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/jsonview"
)

func runPlugins(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "restart":
			return runPluginRestart(ctx, args[1:])
		case "grant", "revoke":
			return runPluginGrant(ctx, args[0], args[1:])
		}
	}
	f := newFlags("plugins", "kairo plugins [--json] | kairo plugins restart NAME | kairo plugins grant|revoke NAME KEY=VALUE...", `
List the running daemon's plugins: state, whether trusted, failures in the
current window, restarts, calls and publishes refused, and grants. Below
the table: what a plugin's manifest requested beyond its grants (a drop-in
gets only what the operator grants: "kairo plugins grant"), and the limits
the [plugin_limits] ceilings capped.

States: running; starting; backoff (failed, restarts after a pause);
stopped (failed too often; "kairo plugins restart NAME" starts it again);
refused (its files cannot run: the error says why; fix them and it reloads);
disabled (turned off in kairo.toml).

With --json, one JSON object per plugin with the names of plugins.list:
name, version, kinds, file, builtin, trusted, state, error, since,
failures, restarts, denied, subscribe, publish, call, wasiFs, wasiEnv,
services, tools, requested (null, or what it asks beyond its grants),
capped.`)
	asJSON := f.Bool("json", false, "print one JSON object per plugin")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var res abi.PluginsListResult
	if err := callKernel(ctx, "kairo plugins", abi.MethodPluginsList, nil, &res); err != nil {
		return err
	}
	if *asJSON {
		for _, p := range res.Plugins {
			fmt.Printf("%s\n", marshalJSON(newPluginJSON(p)))
		}
		return nil
	}
	if len(res.Plugins) == 0 {
		fmt.Println("no plugins: put NAME.wasm and NAME.toml in the plugins folder ([host] plugins_dir)")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tVERSION\tKINDS\tSTATE\tSINCE\tTRUSTED\tFAILURES\tRESTARTS\tDENIED\tGRANTS")
	for _, p := range res.Plugins {
		trusted := yesNo(p.Trusted)
		switch {
		case p.Native:
			trusted += " (built in)"
		case p.Builtin:
			trusted += " (built-in module)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", termLine(p.Name), termLine(orDash(p.Version)), termLine(orDash(strings.Join(p.Kinds, ","))),
			termLine(p.State), time.Since(p.Since).Round(time.Second), trusted, p.Failures, p.Restarts, p.Denied, termLine(grantsLine(p)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, p := range res.Plugins {
		if p.Error != "" {
			fmt.Printf("\n%s: %s\n", termLine(p.Name), termText(p.Error))
		}
		if r := p.Requested; r != nil {
			fmt.Printf("\n%s requested, not granted: %s\n  (kairo plugins grant %s ... grants it)\n", termLine(p.Name),
				termLine(grantsLine(abi.PluginStatus{Subscribe: r.Subscribe, Publish: r.Publish, Call: r.Call, WASIFS: r.WASIFS, WASIEnv: r.WASIEnv})), termLine(p.Name))
		}
		if len(p.Capped) > 0 {
			fmt.Printf("\n%s: %s\n", termLine(p.Name), termLine(strings.Join(p.Capped, "; ")))
		}
	}
	return nil
}

// grantJSON is what a manifest requested beyond the grants, as
// abi.PluginGrant names it.
type grantJSON = jsonview.Grant

// newPluginJSON is the --json form of a plugin, the console's too.
func newPluginJSON(p abi.PluginStatus) jsonview.Plugin { return jsonview.NewPlugin(p) }

// orEmpty is l, or an empty list for nil: --json prints [] rather than null
// for a list with nothing in it.
func orEmpty[T any](l []T) []T { return jsonview.OrEmpty(l) }

func runPluginGrant(ctx context.Context, verb string, args []string) error {
	method, did := abi.MethodPluginsGrant, "granted"
	help := `
Grant a plugin more than its baseline, whatever its manifest asks: a drop-in
plugin (of the plugins folder) may otherwise only publish and subscribe in
its own namespace, plugin.NAME.>, and on [plugin_limits] public, and call no method.
Each KEY=VALUE adds entries, VALUE comma-separated:

  call=METHOD,...      kernel and host methods, by exact name
  publish=SUBJECT,...  subjects or patterns ("app.>")
  subscribe=PATTERN,...
  fs=FOLDER,...        absolute folders it may read through WASI
  env=VAR,...          variables copied from the daemon's environment

The grant is recorded in the event log (kairo.plugin.granted), survives a
restart of the daemon, and applies at once: the plugin reloads. Grants in
kairo.toml, [plugins.NAME.grants], apply as well.`
	if verb == "revoke" {
		method, did = abi.MethodPluginsRevoke, "revoked"
		help = `
Take back what "kairo plugins grant" granted a plugin: the entries named, as
they were granted. Recorded in the event log (kairo.plugin.revoked); the
plugin reloads. Grants in kairo.toml stay: edit [plugins.NAME.grants] there.`
	}
	synopsis := "kairo plugins " + verb + " NAME call=METHOD,... publish=SUBJECT,... subscribe=PATTERN,... fs=FOLDER,... env=VAR,..."
	f := newFlags("plugins "+verb, synopsis, help)
	pos, err := f.parse(args, 2, -1)
	if err != nil {
		return err
	}
	g, err := parseGrant(pos[0], pos[1:])
	if err != nil {
		return &usageError{msg: err.Error(), synopsis: synopsis}
	}
	var st abi.PluginStatus
	if err := callKernel(ctx, "kairo plugins "+verb, method, g, &st); err != nil {
		return err
	}
	fmt.Printf("%s; %s now has: %s\n", did, termLine(st.Name), termLine(grantsLine(st)))
	return nil
}

// parseGrant reads the KEY=VALUE arguments of kairo plugins grant.
func parseGrant(name string, kvs []string) (abi.PluginGrant, error) {
	g := abi.PluginGrant{Plugin: name}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		var list []string
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				list = append(list, e)
			}
		}
		if !ok || len(list) == 0 {
			return g, fmt.Errorf("%q: give KEY=VALUE, such as call=process.spawn or publish=app.>", kv)
		}
		switch k {
		case "call":
			g.Call = append(g.Call, list...)
		case "publish":
			g.Publish = append(g.Publish, list...)
		case "subscribe":
			g.Subscribe = append(g.Subscribe, list...)
		case "fs":
			g.WASIFS = append(g.WASIFS, list...)
		case "env":
			g.WASIEnv = append(g.WASIEnv, list...)
		default:
			return g, fmt.Errorf("%q: unknown key %q; use call, publish, subscribe, fs or env", kv, k)
		}
	}
	return g, nil
}

func grantsLine(p abi.PluginStatus) string {
	var parts []string
	add := func(what string, l []string) {
		if len(l) > 0 {
			parts = append(parts, what+" "+strings.Join(l, ","))
		}
	}
	add("subscribe", p.Subscribe)
	add("publish", p.Publish)
	add("call", p.Call)
	add("fs", p.WASIFS)
	add("env", p.WASIEnv)
	add("serves", p.Services)
	add("tools", p.Tools)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runPluginRestart(ctx context.Context, args []string) error {
	f := newFlags("plugins restart", "kairo plugins restart NAME", "Start a stopped, refused or failing plugin again now, with its failure count cleared.")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := callKernel(ctx, "kairo plugins restart", abi.MethodPluginsRestart, abi.PluginRef{Name: pos[0]}, nil); err != nil {
		return err
	}
	fmt.Printf("restarting %s; `kairo plugins` shows its state\n", pos[0])
	return nil
}

func runPlugin(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "inspect" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Println("usage: kairo plugin inspect [--json] FILE.wasm\n\nkairo plugins lists the running daemon's plugins.")
			return nil
		}
		return &usageError{msg: "kairo plugin takes one command: inspect", synopsis: "kairo plugin inspect [--json] FILE.wasm"}
	}
	f := newFlags("plugin inspect", "kairo plugin inspect [--json] FILE.wasm", `
Print what a plugin module is: the plugin ABI version it speaks, its exports
and imports with their signatures, its manifest (NAME.toml beside it, or the
custom section "kairo.manifest"), and anything that keeps the host from
loading it. The module's _initialize and kairo_abi_version run, under a
deadline, with every host function refusing; nothing else of it runs.`)
	asJSON := f.Bool("json", false, "print one JSON object")
	pos, err := f.parse(args[1:], 1, 1)
	if err != nil {
		return err
	}
	in, err := wasm.Inspect(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		fmt.Printf("%s\n", marshalJSON(newInspectJSON(in)))
		return nil
	}
	// Everything below but the sizes comes from the module and its
	// manifest, which whoever wrote the plugin chose.
	fmt.Printf("file\t%s (%d bytes)\n", termLine(in.File), in.Size)
	if in.ABIVersion != 0 {
		fmt.Printf("abi\tversion %d (this host speaks %d)\n", in.ABIVersion, abi.PluginABIVersion)
	} else {
		fmt.Printf("abi\tunknown: %s\n", termText(in.VersionError))
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "exports:")
	for _, s := range in.Exports {
		fmt.Fprintf(w, "  %s\t%s %s\n", termLine(s.Name), termLine(s.Kind), termLine(s.Type))
	}
	// A module may import one function more than once (Go's do): each is
	// shown once, with how many times.
	fmt.Fprintln(w, "imports:")
	times := map[string]int{}
	for _, s := range in.Imports {
		times[s.Module+"."+s.Name+" "+s.Kind+" "+s.Type]++
	}
	for _, s := range in.Imports {
		key := s.Module + "." + s.Name + " " + s.Kind + " " + s.Type
		n := times[key]
		if n == 0 {
			continue // shown
		}
		times[key] = 0
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (imported %d times)", n)
		}
		fmt.Fprintf(w, "  %s\t%s %s%s\n", termLine(s.Module+"."+s.Name), termLine(s.Kind), termLine(s.Type), more)
	}
	w.Flush()
	if m := in.Manifest; m != nil {
		fmt.Printf("manifest (%s):\n", termLine(m.File))
		fmt.Printf("  name %s, version %s, kinds %s\n", termLine(m.Plugin.Name), termLine(orDash(m.Plugin.Version)), termLine(strings.Join(m.Plugin.Kinds, ",")))
		fmt.Printf("  grants: %s\n", termLine(grantsLine(abi.PluginStatus{Subscribe: m.Grants.Subscribe, Publish: m.Grants.Publish, Call: m.Grants.Call,
			WASIFS: m.Grants.WASI.FS, WASIEnv: m.Grants.WASI.Env})))
		if m.Limits.Memory != 0 || m.Limits.Deadline != "" {
			fmt.Printf("  limits: memory %s, deadline %s\n", m.Limits.Memory, termLine(orDash(m.Limits.Deadline)))
		}
		if len(m.Config) > 0 {
			fmt.Printf("  config: %s\n", termLine(strings.TrimSpace(string(marshalJSON(m.Config)))))
		}
	} else {
		fmt.Printf("manifest: none: %s\n", termText(in.ManifestError))
	}
	if len(in.Problems) == 0 {
		fmt.Println("ok: the host can load it")
		return nil
	}
	fmt.Println("the host would refuse it:")
	for _, p := range in.Problems {
		fmt.Printf("  - %s\n", termText(p))
	}
	return exitCode(1)
}

// inspectJSON is the --json form of kairo plugin inspect, every key always
// there; the manifest's keys are those of its TOML, in camelCase.
type inspectJSON struct {
	File          string        `json:"file"`
	Size          int           `json:"size"`
	ABIVersion    int32         `json:"abiVersion"` // 0 when it could not be read: versionError says why
	VersionError  string        `json:"versionError"`
	Exports       []symbolJSON  `json:"exports"`
	Imports       []symbolJSON  `json:"imports"`
	Manifest      *manifestJSON `json:"manifest"` // null when there is none: manifestError says why
	ManifestError string        `json:"manifestError"`
	Problems      []string      `json:"problems"`
}

type symbolJSON struct {
	Module string `json:"module"` // of an import
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Type   string `json:"type"`
}

type manifestJSON struct {
	File        string         `json:"file"`
	Name        string         `json:"name"`
	Version     string         `json:"version"`
	Description string         `json:"description"`
	Kinds       []string       `json:"kinds"`
	Grants      grantJSON      `json:"grants"`
	Memory      uint64         `json:"memory"`   // bytes; 0: the host's default
	Deadline    string         `json:"deadline"` // "": the host's default
	Config      map[string]any `json:"config"`
}

func newInspectJSON(in *wasm.Inspection) inspectJSON {
	o := inspectJSON{File: in.File, Size: in.Size, ABIVersion: in.ABIVersion, VersionError: in.VersionError,
		Exports: []symbolJSON{}, Imports: []symbolJSON{}, ManifestError: in.ManifestError, Problems: orEmpty(in.Problems)}
	for _, s := range in.Exports {
		o.Exports = append(o.Exports, symbolJSON(s))
	}
	for _, s := range in.Imports {
		o.Imports = append(o.Imports, symbolJSON(s))
	}
	if m := in.Manifest; m != nil {
		g := m.Grants
		o.Manifest = &manifestJSON{File: m.File, Name: m.Plugin.Name, Version: m.Plugin.Version, Description: m.Plugin.Description,
			Kinds:  orEmpty(m.Plugin.Kinds),
			Grants: grantJSON{Subscribe: orEmpty(g.Subscribe), Publish: orEmpty(g.Publish), Call: orEmpty(g.Call), WASIFS: orEmpty(g.WASI.FS), WASIEnv: orEmpty(g.WASI.Env)},
			Memory: uint64(m.Limits.Memory), Deadline: m.Limits.Deadline, Config: m.Config}
		if o.Manifest.Config == nil {
			o.Manifest.Config = map[string]any{}
		}
	}
	return o
}
