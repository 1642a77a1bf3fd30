package main

import (
	"github.com/kairo-os/kairo/abi"

	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// camelCase is a key as the wire names are: a lower-case first letter,
// then letters and digits.
var camelCase = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// freeForm are the keys whose values are JSON someone else shaped (an
// event's data, a tool's JSON schema, a plugin's config): their insides
// are not ours to name.
var freeForm = map[string]bool{"data": true, "parameters": true, "config": true}

// badKeys lists the keys of v, at any depth, that are not camelCase.
func badKeys(v any, at string) []string {
	var bad []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !camelCase.MatchString(k) {
				bad = append(bad, at+k)
			}
			if !freeForm[k] {
				bad = append(bad, badKeys(e, at+k+".")...)
			}
		}
	case []any:
		for _, e := range x {
			bad = append(bad, badKeys(e, at)...)
		}
	}
	return bad
}

// jsonLines checks that out is one JSON object a line, with camelCase
// keys, each with every key of want; it returns the objects.
func jsonLines(t *testing.T, what, out string, want ...string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("%s: a line that is no JSON object: %v\n%s", what, err, line)
		}
		if bad := badKeys(o, ""); len(bad) > 0 {
			t.Errorf("%s: keys not in camelCase: %v\n%s", what, bad, line)
		}
		for _, k := range want {
			if _, ok := o[k]; !ok {
				t.Errorf("%s: no key %q\n%s", what, k, line)
			}
		}
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		t.Fatalf("%s: no output", what)
	}
	return objs
}

// The control of the key check: Go's field names, as plugins and tools
// printed them, fail it; the wire names pass.
func TestBadKeys(t *testing.T) {
	for _, c := range []struct {
		json string
		bad  []string
	}{
		{`{"name":"a","wasiFs":[],"requested":{"call":[]},"parameters":{"max_len":1},"data":{"X":1}}`, nil},
		{`{"Name":"a","WASIFS":[],"requested":{"Call":[]}}`, []string{"Name", "WASIFS", "requested.Call"}},
		{`{"exports":[{"Name":"f"}],"exit_code":1}`, []string{"exit_code", "exports.Name"}},
	} {
		var v any
		if err := json.Unmarshal([]byte(c.json), &v); err != nil {
			t.Fatal(err)
		}
		got := badKeys(v, "")
		slices.Sort(got)
		if !slices.Equal(got, c.bad) {
			t.Errorf("badKeys(%s) = %v, want %v", c.json, got, c.bad)
		}
	}
}

// Every listing takes --json and prints one object a line whose keys are
// the camelCase wire names, the stable ones always there.
func TestJSONListings(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	defer d.stop()
	if r := kairo(t, home, "send", "run echo hello"); r.code != 0 || !strings.Contains(r.stdout, "`echo hello` finished in") {
		t.Fatalf("send run echo hello:\n%s", r)
	}
	if r := kairo(t, home, "spawn", "true"); r.code != 0 {
		t.Fatalf("spawn true:\n%s", r)
	}
	run := ""
	for _, o := range jsonLines(t, "runs --json", kairoOK(t, home, "runs", "--json"),
		"id", "agent", "goal", "status", "startedAt", "iterations", "actions", "inProgress") {
		if o["goal"] == "run echo hello" {
			run, _ = o["id"].(string)
		}
	}
	if run == "" {
		t.Fatal("runs --json lists no run echo hello")
	}
	event := []string{"seq", "id", "type", "source", "time", "data", "correlationId", "causationId"}
	jsonLines(t, "runs show --json", kairoOK(t, home, "runs", "show", "--json", run), event...)
	jsonLines(t, "events replay --json", kairoOK(t, home, "events", "replay", "--json", "kairo.>"), event...)
	jsonLines(t, "events tail --json", tailFor(t, home, 2*time.Second, "events", "tail", "--json", "--from", "1", "kairo.>"), event...)
	jsonLines(t, "ps --json", kairoOK(t, home, "ps", "--json"),
		"id", "pid", "argv", "cwd", "pty", "status", "exitCode", "signal", "startedAt", "exitedAt", "correlationId", "causationId")

	memory := []string{"anchor", "runLoopId", "iteration", "segment", "type", "time", "origin", "source", "quotes", "data", "text"}
	ms := jsonLines(t, "memory search --json", kairoOK(t, home, "memory", "search", "--json", "echo hello"), memory...)
	anchor, _ := ms[0]["anchor"].(string)
	jsonLines(t, "memory show --json", kairoOK(t, home, "memory", "show", "--json", anchor), memory...)

	ps := jsonLines(t, "plugins --json", kairoOK(t, home, "plugins", "--json"),
		"name", "version", "kinds", "file", "builtin", "native", "trusted", "state", "error", "since", "failures", "restarts", "denied",
		"subscribe", "publish", "call", "wasiFs", "wasiEnv", "services", "tools", "requested", "capped")
	if i := slices.IndexFunc(ps, func(o map[string]any) bool { return o["name"] == "rules" }); i < 0 || ps[i]["state"] != "running" || ps[i]["native"] != true {
		t.Errorf("plugins --json: %v; want rules, running, native", ps)
	}
	ts := jsonLines(t, "tools --json", kairoOK(t, home, "tools", "--json"),
		"name", "offered", "description", "parameters", "source", "origin", "grants", "error")
	if i := slices.IndexFunc(ts, func(o map[string]any) bool { return o["name"] == abi.MethodProcessSpawn }); i < 0 || ts[i]["source"] != "kernel" {
		t.Errorf("tools --json has no process.spawn of the kernel: %v", ts)
	}
	jsonLines(t, "tools --json NAME", kairoOK(t, home, "tools", "--json", abi.MethodProcessSpawn), "name", "source", "parameters")

	st := jsonLines(t, "status --json", kairoOK(t, home, "status", "--json"), "home", "homeFrom", "socket", "version", "abiVersion", "methods", "metrics")
	if st[0]["home"] != home || st[0]["homeFrom"] != "KAIRO_HOME" {
		t.Errorf("status --json: home %v from %v; want %s from KAIRO_HOME", st[0]["home"], st[0]["homeFrom"], home)
	}
	jsonLines(t, "version --json", kairoOK(t, home, "version", "--json"), "version", "abiVersion", "go", "platform")
	plugins := t.TempDir()
	buildPlugin(t, plugins, "rules")
	in := jsonLines(t, "plugin inspect --json", kairoOK(t, home, "plugin", "inspect", "--json", filepath.Join(plugins, "rules.wasm")),
		"file", "size", "abiVersion", "versionError", "exports", "imports", "manifest", "manifestError", "problems")
	if m, _ := in[0]["manifest"].(map[string]any); m == nil || m["name"] != "rules" || m["grants"] == nil {
		t.Errorf("plugin inspect --json: manifest %v; want rules's, with its grants", in[0]["manifest"])
	}
}

// kairoOK is kairo's stdout; it fails the test unless kairo exits 0.
func kairoOK(t *testing.T, home string, args ...string) string {
	t.Helper()
	r := kairo(t, home, args...)
	if r.code != 0 {
		t.Fatalf("kairo %s:\n%s", strings.Join(args, " "), r)
	}
	return r.stdout
}

// tailFor runs a kairo command that does not end by itself for d, then
// interrupts it, as Ctrl-C does, and returns what it printed.
func tailFor(t *testing.T, home string, d time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, kairoBin, args...)
	cmd.Env = childEnv(home)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	// Ended by the interrupt, exec reports the deadline; by an error, the
	// exit code.
	if ctx.Err() == nil || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("kairo %s: ended %v, before the interrupt or not by it\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
