package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/wasmbuild"
	"github.com/kairo-os/kairo/sdk/client"
)

// The hostile suite of issue 15, against a real `kairo up`: each kind of
// misbehaving module is dropped into the running daemon's plugin folder
// beside a well-behaved control that does the same thing within its grants
// and limits, triggered with an event, watched, and removed. For each, the
// kernel answers pings (median within 100 ms) while the hostile module
// runs, the built-in echo plugin still answers, the failure or refusal is
// reported with its reason (kairo.plugin.failed naming the cap, refused,
// denied and throttled with a count, or the error the plugin got), the
// control is not reported at all, and the daemon's RSS rises by at most
// the plugin's memory limit plus 32 MiB.

// hostileMemory is the memory limit of every drop-in of the suite: [plugin_limits]
// max_memory, so no manifest gets more.
const hostileMemory = 32 << 20

// hostileKind is one kind of the suite: a hostile drop-in and its control.
type hostileKind struct {
	kind             string // the plugins are h_KIND and c_KIND
	hostile, control drop
}

// drop is one plugin of a kind: its files, the operator's word on it, and
// what it must be seen to do.
type drop struct {
	// module is the .wasm; nil is the hostile guest.
	module func(name string) []byte
	// manifest is the NAME.toml; nil is hostileTOML(name, config), "" no
	// file.
	manifest func(name string) string
	config   string // the lines of the guest's [config]
	// deadline, when set, is the manifest's [limits] deadline; else
	// [plugin_limits] deadline, 2s, so that no plugin fails for want of time on a
	// loaded machine unless failing so is its kind.
	deadline string
	// sparse, when set, makes the .wasm a sparse file of that size.
	sparse int64
	// trigger: publish plugin.NAME.go once it has started.
	trigger bool
	// want says what is missing from the events seen so far, "" when all
	// is there.
	want func(o *observer, name string) string
}

// grantsTOML are the operator's [plugins.NAME] sections of the suite,
// written before the daemon starts.
const grantsTOML = `
[plugins.h_args.grants]
call = ["kernel.ping"]
[plugins.c_args.grants]
call = ["kernel.ping"]
[plugins.h_calls.grants]
call = ["kernel.ping"]
[plugins.c_calls.grants]
call = ["kernel.ping"]
[plugins.c_deny.grants]
publish = ["forbidden.>"]
[plugins.c_self.grants]
call = ["kernel.ping"]
[plugins.h_grantself.grants]
call = ["plugins.grant"]
[plugins.c_grantself.grants]
call = ["plugins.list"]
[plugins.h_hoard.grants]
call = ["h_hoard.hoard"]
[plugins.c_hoard.grants]
call = ["c_hoard.hoard"]
[plugins.h_recurse.grants]
call = ["h_recurse.recurse"]
[plugins.c_recurse.grants]
call = ["c_recurse.recurse"]
`

func hostileKinds(readable string) []hostileKind {
	return []hostileKind{
		// The guest's own misbehaviour in its code.
		{"loop",
			drop{config: `mode = "loop"`, deadline: "500ms", trigger: true, want: failed("handle", "deadline", "deadline of 500ms")},
			drop{config: "mode = \"loop\"\nn = 100000", trigger: true, want: done("looped 100000 times")}},
		{"loopinit",
			drop{config: `mode = "loopinit"`, want: failed("init", "deadline", "deadline of 5s")},
			drop{config: "mode = \"loopinit\"\nn = 100000", want: started()}},
		{"panic",
			drop{config: `mode = "panic"`, trigger: true, want: failed("handle", "trap", "hostile plugin panics in handle")},
			drop{config: "mode = \"panic\"\nrecover = true", trigger: true, want: done("")}},
		{"grow",
			drop{config: `mode = "grow"`, trigger: true, want: failed("handle", "memory", "memory pages")},
			drop{config: "mode = \"grow\"\nmib = 4", trigger: true, want: done("holds 4 MiB")}},
		{"clock",
			drop{config: `mode = "clock"`, deadline: "500ms", trigger: true, want: failed("handle", "deadline", "deadline of 500ms")},
			drop{config: "mode = \"clock\"\nn = 100000", trigger: true, want: done("the clock says")}},
		{"sleep",
			drop{config: "mode = \"sleep\"\nms = 3600000", deadline: "500ms", trigger: true, want: failed("handle", "deadline", "deadline of 500ms")},
			drop{config: "mode = \"sleep\"\nms = 5", trigger: true, want: done("slept")}},
		// What it asks of the host.
		{"flood",
			drop{config: `mode = "flood"`, trigger: true, want: throttled("publishes", 1024)},
			drop{config: "mode = \"flood\"\nn = 100", trigger: true, want: done("published 100")}},
		{"deny",
			drop{config: "mode = \"cost\"\npublishes = 10000\nsubject = \"forbidden.flood\"", trigger: true, want: denied("publish", "forbidden.flood", 10000)},
			drop{config: "mode = \"cost\"\npublishes = 100\nsubject = \"forbidden.flood\"", trigger: true, want: done("called 0, published 100")}},
		{"kernelsubject",
			drop{config: "mode = \"cost\"\npublishes = 1\nsubject = \"kairo.plugin.failed\"", trigger: true, want: denied("publish", "kairo.plugin.failed", 1)},
			drop{config: "mode = \"cost\"\npublishes = 1", trigger: true, want: done("called 0, published 1")}},
		{"args",
			drop{config: "mode = \"cost\"\ncalls = 1\ncallSize = 2097152", trigger: true, want: failed("handle", "limit", "InstanceConfig.MaxCallArgs")},
			drop{config: "mode = \"cost\"\ncalls = 1\ncallSize = 1024", trigger: true, want: done("called 1, published 0")}},
		{"calls",
			drop{config: "mode = \"cost\"\ncalls = 2000", trigger: true, want: throttled("calls", 256)},
			drop{config: "mode = \"cost\"\ncalls = 100", trigger: true, want: done("called 100, published 0")}},
		{"bigpublish",
			drop{config: "mode = \"cost\"\npublishes = 1\npublishSize = 4300000", trigger: true, want: failed("handle", "limit", "bus.MaxEventData")},
			drop{config: "mode = \"cost\"\npublishes = 1\npublishSize = 65536", trigger: true, want: done("called 0, published 1")}},
		{"manypublishes",
			drop{config: "mode = \"cost\"\npublishes = 1000\npublishSize = 102400", trigger: true, want: failed("handle", "limit", "InstanceConfig.MaxBatchBytes")},
			drop{config: "mode = \"cost\"\npublishes = 10\npublishSize = 102400", trigger: true, want: done("called 0, published 10")}},
		{"loglines",
			drop{config: "mode = \"cost\"\nlogs = 100000", trigger: true, want: throttled("log lines", 100)},
			drop{config: "mode = \"cost\"\nlogs = 50", trigger: true, want: done("called 0, published 0")}},
		{"loghuge",
			drop{config: "mode = \"cost\"\nlogs = 50\nlogSize = 1048576", trigger: true, want: throttled("log bytes", 4096)},
			drop{config: "mode = \"cost\"\nlogs = 50\nlogSize = 1000", trigger: true, want: done("called 0, published 0")}},
		{"hoard",
			drop{config: "mode = \"hoard\"\ncalls = 100", trigger: true, want: failedWith("ping.result", "maxPendingServices")},
			drop{config: "mode = \"hoard\"\ncalls = 10\nanswer = true", trigger: true, want: results("ping.result", 10)}},
		{"recurse",
			drop{config: `mode = "recurse"`, trigger: true, want: failedWith("recurse.result", "nested deeper than 8")},
			drop{config: "mode = \"recurse\"\nn = 3", trigger: true, want: results("recurse.result", 3)}},
		{"readfile",
			drop{config: "mode = \"readfile\"\npath = \"/etc/passwd\"", trigger: true, want: failedWith("file.read", "/etc/passwd")},
			drop{config: fmt.Sprintf("mode = \"readfile\"\npath = %q", filepath.Join(readable, "note")), trigger: true, want: results("file.read", 1)}},
		// Authority it gives itself.
		{"self",
			drop{manifest: func(name string) string {
				return hostileTOML(name, "mode = \"ping\"\nmethod = \"process.spawn\"") + selfGrant
			}, trigger: true, want: all(denied("call", abi.MethodProcessSpawn, 1), failedWith("ping.result", "call process.spawn: not granted"))},
			drop{manifest: func(name string) string {
				return hostileTOML(name, "mode = \"ping\"\nmethod = \"kernel.ping\"") + "[grants]\ncall = [\"kernel.ping\"]\n"
			}, trigger: true, want: results("ping.result", 1)}},
		{"grantself",
			drop{config: "mode = \"ping\"\nmethod = \"plugins.grant\"", trigger: true, want: failedWith("ping.result", "the operator's alone")},
			drop{config: "mode = \"ping\"\nmethod = \"plugins.list\"", trigger: true, want: results("ping.result", 1)}},
		{"subscribeall",
			drop{manifest: func(name string) string {
				return strings.Replace(hostileTOML(name, `mode = "noop"`), `subscribe = "plugin.`+name+`.>"`, `subscribe = ">"`, 1)
			}, want: denied("subscribe", ">", 1)},
			drop{config: `mode = "noop"`, want: started()}},
		// Manifests past the parser's bounds.
		{"nestedtoml",
			drop{manifest: func(name string) string { return hostileTOML(name, `mode = "noop"`) + nested(8<<20) }, want: refused("256KiB")},
			drop{manifest: func(name string) string { return hostileTOML(name, `mode = "noop"`) + nested(20) }, want: started()}},
		{"nestedsection",
			drop{module: func(name string) []byte {
				return asmModule{name: name, manifest: hostileTOML(name, "") + nested(8<<20)}.bytes()
			}, manifest: none, want: refused("256KiB")},
			drop{module: func(name string) []byte {
				return asmModule{name: name, manifest: hostileTOML(name, "") + nested(20)}.bytes()
			}, manifest: none, trigger: true, want: done("")}},
		// Modules past the caps checked before compiling.
		{"huge",
			drop{sparse: 65 << 20, want: refused("module cap")},
			drop{module: func(name string) []byte { return asmModule{name: name, customs: 1, customSize: 1 << 20}.bytes() }, trigger: true, want: done("")}},
		{"functions",
			drop{module: func(name string) []byte { return asmModule{name: name, extraFuncs: 100_000}.bytes() }, want: refused("host.MaxModuleFunctions")},
			drop{module: func(name string) []byte { return asmModule{name: name, extraFuncs: 1000}.bytes() }, trigger: true, want: done("")}},
		{"customs",
			drop{module: func(name string) []byte { return asmModule{name: name, customs: 65, customSize: 16}.bytes() }, want: refused("host.MaxCustomSections")},
			drop{module: func(name string) []byte { return asmModule{name: name, customs: 8, customSize: 16}.bytes() }, trigger: true, want: done("")}},
		{"custombytes",
			drop{module: func(name string) []byte { return asmModule{name: name, customs: 3, customSize: 6 << 20}.bytes() }, want: refused("host.MaxCustomSectionBytes")},
			drop{module: func(name string) []byte { return asmModule{name: name, customs: 3, customSize: 1 << 20}.bytes() }, trigger: true, want: done("")}},
		{"notwasm",
			drop{module: func(string) []byte { return []byte("#!/bin/sh\necho owned\n") }, want: refused("not a valid WebAssembly module")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		{"noexport",
			drop{module: func(name string) []byte { return asmModule{name: name, noHandle: true}.bytes() }, want: refused("kairo_handle")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		{"version",
			drop{module: func(name string) []byte { return asmModule{name: name, version: 99}.bytes() }, want: refused("ABI version 99")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		{"import",
			drop{module: func(name string) []byte {
				return asmModule{name: name, extraImport: [2]string{"env", "system"}}.bytes()
			}, want: refused("env.system")},
			drop{module: func(name string) []byte { return asmModule{name: name, extraImport: [2]string{"kairo", "now"}}.bytes() }, trigger: true, want: done("")}},
		{"memory4g",
			drop{module: func(name string) []byte { return asmModule{name: name, minPages: 65536}.bytes() }, want: refused("")},
			drop{module: func(name string) []byte { return asmModule{name: name, minPages: 64}.bytes() }, trigger: true, want: done("")}},
		// Exports that lie, and output that is not what it says.
		{"lieoutput",
			drop{module: func(name string) []byte { return asmModule{name: name, output: packed(0xffff0000, 64)}.bytes() }, trigger: true, want: failed("handle", "bad_pointer", "outside the guest memory")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		{"lielength",
			drop{module: func(name string) []byte { return asmModule{name: name, output: packed(asmReplyAt, 0xffffffff)}.bytes() }, trigger: true, want: failed("handle", "limit", "InstanceConfig.MaxOutput")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		{"lieinput",
			drop{module: func(name string) []byte { return asmModule{name: name, input: 0x7fff0000}.bytes() }, want: failed("init", "bad_pointer", "kairo_input returned a buffer")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		{"logrange",
			drop{module: func(name string) []byte { return asmModule{name: name, logAt: [2]uint32{1024, 0x7fffffff}}.bytes() }, trigger: true, want: failed("handle", "bad_pointer", "kairo.log message")},
			drop{module: func(name string) []byte { return asmModule{name: name, logAt: [2]uint32{1024, 8}}.bytes() }, trigger: true, want: done("")}},
		{"garbage",
			drop{module: func(name string) []byte { return asmModule{name: name, reply: []byte{0xc1, 0xc1, 0xc1, 0xc1}}.bytes() }, trigger: true, want: failed("handle", "bad_output", "")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		// Decompression-style amplification: a few bytes that claim a lot.
		{"amplify",
			drop{module: func(name string) []byte { return asmModule{name: name, reply: claimActions(1<<32-1, 1)}.bytes() }, trigger: true, want: failed("handle", "", "")},
			drop{module: func(name string) []byte { return asmModule{name: name, reply: claimActions(2, 2)}.bytes() }, trigger: true, want: done("")}},
		{"emptyactions",
			drop{module: func(name string) []byte {
				return asmModule{name: name, reply: claimActions(4_000_000, 4_000_000)}.bytes()
			}, trigger: true, want: failed("handle", "limit", "InstanceConfig.MaxActions")},
			drop{module: func(name string) []byte { return asmModule{name: name, reply: claimActions(1000, 1000)}.bytes() }, trigger: true, want: done("")}},
		// Its init: what it says it is, and how.
		{"lieinit",
			drop{module: func(name string) []byte {
				return asmModule{name: name, initOutput: packed(asmInitAt, 0xffffffff)}.bytes()
			}, want: failed("init", "limit", "InstanceConfig.MaxOutput")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		{"garbageinit",
			drop{module: func(name string) []byte { return asmModule{name: name, initOut: []byte{0xc1, 0xc1}}.bytes() }, want: failed("init", "bad_output", "")},
			drop{module: func(name string) []byte { return asmModule{name: name}.bytes() }, trigger: true, want: done("")}},
		{"amplifyinit",
			drop{module: func(name string) []byte {
				return asmModule{name: name, initOut: claimSubscriptions(name, 1<<32-1)}.bytes()
			}, want: failed("init", "bad_output", "")},
			drop{module: func(name string) []byte { return asmModule{name: name, initOut: claimSubscriptions(name, 1)}.bytes() }, trigger: true, want: done("")}},
		{"impostor",
			drop{module: func(name string) []byte { return asmModule{name: name, initOut: initOutput("echo", nil)}.bytes() }, want: refused(`its init says it is "echo"`)},
			drop{module: func(name string) []byte { return asmModule{name: name, initOut: initOutput(name, nil)}.bytes() }, trigger: true, want: done("")}},
		{"squat",
			drop{module: func(name string) []byte {
				return asmModule{name: name, initOut: initOutput(name, []string{"echo.answer"})}.bytes()
			}, want: refused(`service "echo.answer" must be named`)},
			drop{module: func(name string) []byte {
				return asmModule{name: name, initOut: initOutput(name, []string{name + ".answer"})}.bytes()
			}, trigger: true, want: done("")}},
		{"deepreply",
			drop{module: func(name string) []byte { return asmModule{name: name, reply: deepReply(100_000)}.bytes() }, trigger: true, want: failed("handle", "bad_output", "")},
			drop{module: func(name string) []byte { return asmModule{name: name, reply: deepReply(8)}.bytes() }, trigger: true, want: done("")}},
	}
}

// selfGrant is what a manifest asks beyond what a drop-in gets.
const selfGrant = `
[grants]
call = ["process.spawn"]

[limits]
memory = "4GiB"
deadline = "1h"
`

// hostileTOML is the manifest of the hostile guest named name with the
// [config] lines config: it subscribes and publishes in its own namespace.
func hostileTOML(name, config string) string {
	return fmt.Sprintf(`[plugin]
name = %q
kinds = ["policy"]

[config]
name = %[1]q
prefix = "plugin.%[1]s."
subscribe = "plugin.%[1]s.>"
%s
`, name, config)
}

// none is no NAME.toml: the module carries its manifest.
func none(string) string { return "" }

// nested is a TOML key whose value is arrays nested to about size bytes.
func nested(size int) string {
	depth := size / 2
	return "\n[config.deep]\nv = " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n"
}

func TestHostilePlugins(t *testing.T) {
	t.Parallel()
	start := time.Now()
	home := t.TempDir()
	plugins := filepath.Join(home, "plugins")
	readable := t.TempDir()
	if err := os.WriteFile(filepath.Join(readable, "note"), []byte("granted"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The daemon's binary with the built-in echo beside it, as make
	// installs them.
	binDir := t.TempDir()
	bin := filepath.Join(binDir, "kairo")
	if err := os.Link(kairoBin, bin); err != nil {
		t.Fatal(err)
	}
	guest := filepath.Join(t.TempDir(), "hostile.wasm")
	var buildErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buildErr = wasmbuild.Build("./host/wasm/testdata/hostile", guest)
	}()
	if err := wasmbuild.Plugin("echo", filepath.Join(binDir, "plugins")); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	hostileGuest, err := os.ReadFile(guest)
	if err != nil {
		t.Fatal(err)
	}

	config := fmt.Sprintf(`[plugin_limits]
memory = "32MiB"
max_memory = "%dMiB"
deadline = "2s"
max_deadline = "2s"
`, hostileMemory>>20) + grantsTOML + fmt.Sprintf("[plugins.c_readfile.grants]\nwasi_fs = [%q]\n", readable)
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUpBin(t, home, bin)
	pid := d.cmd.Process.Pid
	o := observe(t, d)
	pinger := d.dial()
	defer pinger.Close()
	o.publish(t, pinger, "demo.warmup")
	if s := o.await(t, 30*time.Second, func() string { return o.echoes("warmup") }); s != "" {
		t.Fatalf("the built-in echo does not answer before the suite: %s\n%s", s, d.stderr)
	}

	// The first load of the guest compiles it, which costs the daemon
	// some 100 MiB once: the compilation cache serves every later load.
	// Warm it, so each kind's RSS is what the kind costs.
	writeDrop(t, plugins, "warm", hostileGuest, drop{config: `mode = "noop"`})
	if s := o.await(t, 60*time.Second, func() string { return started()(o, "warm") }); s != "" {
		t.Fatalf("the guest did not start: %s\n%s", s, tail(d.stderr.String()))
	}
	for _, f := range []string{"warm.wasm", "warm.toml"} {
		if err := os.Remove(filepath.Join(plugins, f)); err != nil {
			t.Fatal(err)
		}
	}
	if s := o.await(t, 30*time.Second, func() string {
		if !o.has("kairo.plugin.unloaded", "warm") {
			return "not unloaded"
		}
		return ""
	}); s != "" {
		t.Fatalf("warm: %s", s)
	}

	var report []string
	for _, k := range hostileKinds(readable) {
		t.Run(k.kind, func(t *testing.T) {
			hostile, control := "h_"+k.kind, "c_"+k.kind
			rss0 := rssOf(t, pid)
			sides := []struct {
				name string
				drop drop
			}{{hostile, k.hostile}, {control, k.control}}
			for _, s := range sides {
				writeDrop(t, plugins, s.name, hostileGuest, s.drop)
				t.Cleanup(func() { // when the kind failed before it removed them
					os.Remove(filepath.Join(plugins, s.name+".wasm"))
					os.Remove(filepath.Join(plugins, s.name+".toml"))
				})
			}

			// Ping while the hostile plugin loads, runs and fails.
			ctx, stopPings := context.WithCancel(context.Background())
			defer stopPings()
			pings := make(chan []time.Duration, 1)
			go func() { pings <- pingUntil(ctx, pinger) }()

			triggered := map[string]bool{}
			echoed := false
			peak := rss0
			var missing string
			deadline := time.Now().Add(30 * time.Second)
			for {
				if r := rssNow(pid); r > peak {
					peak = r
				}
				missing = ""
				for _, s := range sides {
					if s.drop.trigger && !triggered[s.name] && o.has("kairo.plugin.started", s.name) {
						o.publish(t, pinger, "plugin."+s.name+".go")
						triggered[s.name] = true
					}
				}
				if !echoed && len(triggered) > 0 || !echoed && !k.hostile.trigger {
					o.publish(t, pinger, "demo."+k.kind)
					echoed = true
				}
				for _, s := range sides {
					if s.drop.trigger && !triggered[s.name] {
						missing += s.name + " has not started; "
						continue
					}
					if m := s.drop.want(o, s.name); m != "" {
						missing += s.name + ": " + m + "; "
					}
				}
				if echoed {
					missing += o.echoes(k.kind)
				}
				if missing == "" || time.Now().After(deadline) {
					break
				}
				select {
				case <-d.exited:
					t.Fatalf("the daemon died: %v\n%s", d.err, tail(d.stderr.String()))
				case <-time.After(20 * time.Millisecond):
				}
			}
			stopPings()
			ds := <-pings
			if missing != "" {
				t.Fatalf("after 30s: %s\nevents of the kind:\n%s\ndaemon log:\n%s", missing, o.dump(hostile, control), tail(d.stderr.String()))
			}
			med := median(ds)
			if len(ds) < 3 || med > 100*time.Millisecond {
				t.Errorf("kernel pings while %s ran: %d, median %v; want at least 3, within 100ms", hostile, len(ds), med)
			}
			// The control did its work within its limits, and nothing
			// about it was reported.
			for _, subject := range []string{"kairo.plugin.failed", "kairo.plugin.refused", "kairo.plugin.denied", "kairo.plugin.throttled", "kairo.plugin.stopped"} {
				if o.has(subject, control) {
					t.Errorf("the control %s was reported: %s", control, o.dump(control))
				}
			}
			if k.kind == "self" {
				checkSelfGrant(t, home, hostile)
			}

			for _, s := range sides {
				for _, f := range []string{s.name + ".wasm", s.name + ".toml"} {
					if err := os.Remove(filepath.Join(plugins, f)); err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
				}
			}
			if m := o.await(t, 30*time.Second, func() string {
				if r := rssNow(pid); r > peak {
					peak = r
				}
				if !o.has("kairo.plugin.unloaded", hostile) || !o.has("kairo.plugin.unloaded", control) {
					return "not unloaded"
				}
				return ""
			}); m != "" {
				t.Fatalf("%s and %s were %s after 30s", hostile, control, m)
			}
			rise := peak - rss0
			if limit := int64(hostileMemory + 32<<20); rise > limit {
				t.Errorf("the daemon's RSS rose %.1f MiB (%.1f to %.1f), over %d MiB", mib(rise), mib(rss0), mib(peak), limit>>20)
			}
			report = append(report, fmt.Sprintf("%-14s pings %2d median %6v  rss %+6.1f MiB  %s", k.kind, len(ds), med.Round(10*time.Microsecond), mib(rise), o.reason(hostile)))
		})
		select {
		case <-d.exited:
			t.Fatalf("the daemon died in kind %s", k.kind)
		default:
		}
	}
	t.Logf("%d kinds in %v:\n%s", len(report), time.Since(start).Round(time.Millisecond), strings.Join(report, "\n"))
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, tail(d.stderr.String()))
	}
}

// checkSelfGrant: `kairo plugins` shows what the manifest asked as
// requested and the limits the ceilings lowered.
func checkSelfGrant(t *testing.T, home, name string) {
	t.Helper()
	r := kairo(t, home, "plugins")
	if r.code != 0 || !strings.Contains(r.stdout, name+" requested, not granted: call process.spawn") ||
		!strings.Contains(r.stdout, name+": memory 4GiB capped to 32MiB; deadline 1h0m0s capped to 2s") {
		t.Errorf("kairo plugins does not show what %s asked:\n%s", name, r)
	}
}

// writeDrop writes a plugin's files into the folder, the module last: the
// drop's own module, or guest.
func writeDrop(t *testing.T, dir, name string, guest []byte, d drop) {
	t.Helper()
	manifest := hostileTOML(name, d.config)
	if d.manifest != nil {
		manifest = d.manifest(name)
	}
	if d.deadline != "" {
		manifest += fmt.Sprintf("\n[limits]\ndeadline = %q\n", d.deadline)
	}
	if manifest != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".toml"), []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name+".wasm")
	if d.sparse > 0 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err == nil {
			_, err = f.Write(asmModule{name: name}.bytes())
		}
		if err == nil {
			err = f.Truncate(d.sparse)
		}
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	wasm := guest
	if d.module != nil {
		wasm = d.module(name)
	}
	if err := os.WriteFile(path, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pingUntil pings the kernel every 10 ms until ctx ends, and returns the
// round trips. A ping that fails counts as a minute.
func pingUntil(ctx context.Context, c *client.Client) []time.Duration {
	var ds []time.Duration
	for {
		pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := c.Ping(pctx)
		cancel()
		if err != nil {
			d = time.Minute
		}
		ds = append(ds, d)
		select {
		case <-ctx.Done():
			return ds
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// rssNow is rssOf for use in a loop: 0 when it cannot be read.
func rssNow(pid int) int64 { return statusKiB(pid, "VmRSS") << 10 }

// tail is the end of a daemon's log, each line cut short.
func tail(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}
