package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/manifests"
)

// greetSkill is a skill manifest whose params cover the types: a required
// string, an integer with a default, an optional enum.
const greetSkill = `
[skill]
name = "greet"
description = "Print a greeting"
command = ["/bin/echo", "{greeting}", "n={count}", "{mode}"]

[params.greeting]
description = "what to say"

[params.count]
type = "integer"
description = "how many"
default = 1

[params.mode]
enum = ["quiet", "loud"]
required = false

[fs]
read = ["/usr", "/lib", "/etc"]
exec = ["/bin/echo"]

[net]
connect_tcp = [443]

[limits]
wall_seconds = 10
memory = "64MiB"
`

// writeSkill writes a skill manifest into dir/NAME/skill.toml.
func writeSkill(t testing.TB, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name, "skill.toml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeServer is an MCP server as the registry sees one: a Source. The
// MCP client is tested against real servers in its own package; here the
// registry's side of the interface is what is tested.
type fakeServer struct {
	tools []abi.Tool
	call  func(ctx context.Context, tool, args string) (string, bool, error)
}

func (s *fakeServer) Tools() []abi.Tool { return s.tools }
func (s *fakeServer) Call(ctx context.Context, tool, args string) (string, bool, error) {
	return s.call(ctx, tool, args)
}

func byName(list []abi.ToolInfo) map[string]abi.ToolInfo {
	m := map[string]abi.ToolInfo{}
	for _, t := range list {
		m[t.Name] = t
	}
	return m
}

// One list holds the tools of every source, each with its source and
// grants, and tools.list serves it over the kernel's table.
func TestDefinitionsFromEverySource(t *testing.T) {
	skill := writeSkill(t, t.TempDir(), "greet", greetSkill)
	e := newEnv(t, tools.Config{Skills: map[string]string{"greet": skill}}, map[string]string{"toolbox": ""})
	if err := e.reg.AddSource("files", &fakeServer{tools: []abi.Tool{{Name: "read_file", Description: "read a file"}}}, "npx server-filesystem /srv", []string{"fs.read /srv"}); err != nil {
		t.Fatal(err)
	}
	got := byName(e.reg.List())
	for name, want := range map[string]string{
		abi.MethodProcessSpawn: abi.ToolSourceKernel, abi.MethodProcessStdinWrite: abi.ToolSourceKernel, abi.MethodProcessWait: abi.ToolSourceKernel,
		abi.MethodProcessStatus: abi.ToolSourceKernel, abi.MethodProcessSignal: abi.ToolSourceKernel, abi.MethodProcessKill: abi.ToolSourceKernel,
		"result.read": abi.ToolSourceKernel, "skill.greet": abi.ToolSourceSkill,
		"toolbox.echo": abi.ToolSourcePlugin, "toolbox.sleep": abi.ToolSourcePlugin, "toolbox.crash": abi.ToolSourcePlugin,
		"mcp.files.read_file": abi.ToolSourceMCP,
	} {
		ti, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s is not listed; the list: %v", name, keys(got))
		case ti.Source != want || ti.Error != "":
			t.Errorf("%s: source %q error %q, want source %q and no error", name, ti.Source, ti.Error, want)
		case ti.Parameters == nil && ti.Source != abi.ToolSourceMCP:
			t.Errorf("%s has no parameters schema", name)
		}
	}
	if g := got["skill.greet"]; g.Origin != skill || !holds(g.Grants, "fs.exec /bin/echo", "net.connect_tcp 443", "limits wall_seconds=10, memory=64MiB") {
		t.Errorf("skill.greet: origin %q grants %q", g.Origin, g.Grants)
	}
	if g := got["mcp.files.read_file"]; g.Origin != "npx server-filesystem /srv" || !holds(g.Grants, "fs.read /srv") {
		t.Errorf("mcp.files.read_file: origin %q grants %q", g.Origin, g.Grants)
	}
	if g := got["toolbox.echo"]; !strings.HasSuffix(g.Origin, "toolbox.wasm") {
		t.Errorf("toolbox.echo: origin %q", g.Origin)
	}

	out, aerr := e.kernel.Invoke(context.Background(), abi.MethodToolsList, &kernel.Call{Session: e.sess})
	if aerr != nil {
		t.Fatal(aerr)
	}
	var res abi.ToolsListResult
	if err := msgpack.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != len(got) || res.Tools[0].Name > res.Tools[len(res.Tools)-1].Name {
		t.Errorf("tools.list gave %d tools, want the %d of List, sorted", len(res.Tools), len(got))
	}
	if defs := e.reg.Definitions(); len(defs) != len(got) {
		t.Errorf("%d definitions for %d tools", len(defs), len(got))
	}
}

func keys(m map[string]abi.ToolInfo) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// holds reports whether have holds every one of want.
func holds(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// A skill's tool takes the params of its manifest as its JSON schema, and
// a call runs the skill with them, as a real process in the caller's
// session.
func TestSkillTool(t *testing.T) {
	skill := writeSkill(t, t.TempDir(), "greet", greetSkill)
	e := newEnv(t, tools.Config{Skills: map[string]string{"greet": skill}}, nil)
	sk, err := manifests.LoadSkill(skill)
	if err != nil {
		t.Fatal(err)
	}
	def := byName(e.reg.List())["skill.greet"]
	if !reflect.DeepEqual(roundTrip(t, def.Parameters), roundTrip(t, sk.JSONSchema())) {
		t.Errorf("parameters %v, want the manifest's schema %v", def.Parameters, sk.JSONSchema())
	}
	schema := roundTrip(t, def.Parameters)
	if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "greeting" {
		t.Errorf("required %v, want [greeting]", schema["required"])
	}
	if !strings.HasPrefix(def.Description, "Print a greeting") {
		t.Errorf("description %q", def.Description)
	}

	res := e.call("skill.greet", `{"greeting": "hello", "count": 2, "mode": "loud"}`)
	if res.Status != abi.StatusDone || res.ProcessID == "" {
		t.Fatalf("skill.greet: %+v", res)
	}
	wait := e.call(abi.MethodProcessWait, `{"processId": "`+res.ProcessID+`", "timeout": 10}`)
	var w abi.WaitResult
	if err := msgpack.Unmarshal(wait.Result, &w); err != nil || w.Process.ExitCode == nil || *w.Process.ExitCode != 0 {
		t.Fatalf("process.wait: %+v (%v)", wait, err)
	}
	if !reflect.DeepEqual(w.Process.Argv, []string{"/bin/echo", "hello", "n=2", "loud"}) {
		t.Errorf("argv %q", w.Process.Argv)
	}
	if w.Process.CorrelationID != "loop-1" {
		t.Errorf("the process's correlation is %q, want the run loop", w.Process.CorrelationID)
	}
	if out := e.sess.output(); out != "hello n=2 loud\n" {
		t.Errorf("output %q", out)
	}

	for args, want := range map[string]string{
		`{"count": 2}`:                     `needs param "greeting"`,
		`{"greeting": "hi", "count": "x"}`: `"x" is not an integer`,
		`{"greeting": "hi", "mode": "x"}`:  `"x" is not one of "quiet", "loud"`,
		`{"greeting": ["a"]}`:              `param "greeting" is a list`,
		`not json`:                         `arguments are not a JSON object`,
	} {
		if res := e.call("skill.greet", args); res.Status != abi.StatusFailed || !strings.Contains(res.Error, want) {
			t.Errorf("skill.greet %s: %+v, want an error saying %q", args, res, want)
		}
	}
}

func roundTrip(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The kernel's tools run things in the caller's session: a process is
// spawned, fed, waited for, signalled; process.spawn keeps the arguments
// the agent has always given it.
func TestKernelTools(t *testing.T) {
	e := newEnv(t, tools.Config{}, nil)
	spawn := e.call(abi.MethodProcessSpawn, `{"argv": ["/bin/cat"]}`)
	if spawn.Status != abi.StatusDone || spawn.ProcessID == "" {
		t.Fatalf("process.spawn: %+v", spawn)
	}
	id := spawn.ProcessID
	if res := e.call(abi.MethodProcessStdinWrite, `{"processId": "`+id+`", "data": "hi\n", "close": true}`); res.Status != abi.StatusDone {
		t.Fatalf("process.stdin.write: %+v", res)
	}
	res := e.call(abi.MethodProcessWait, `{"processId": "`+id+`", "timeout": 10}`)
	var w abi.WaitResult
	if err := msgpack.Unmarshal(res.Result, &w); err != nil || w.Process.Status != abi.ProcessExited || res.ProcessID != "" {
		t.Fatalf("process.wait: %+v %+v (%v)", res, w, err)
	}
	if out := e.sess.output(); out != "hi\n" {
		t.Errorf("cat wrote %q", out)
	}

	sleep := e.call(abi.MethodProcessSpawn, `{"command": "exec sleep 30"}`)
	res = e.call(abi.MethodProcessStatus, `{"processId": "`+sleep.ProcessID+`"}`)
	var info abi.ProcessInfo
	if err := msgpack.Unmarshal(res.Result, &info); err != nil || info.Status != abi.ProcessRunning {
		t.Fatalf("process.status: %+v (%v)", res, err)
	}
	if res := e.call(abi.MethodProcessWait, `{"processId": "`+sleep.ProcessID+`", "timeout": 0.05}`); !strings.Contains(string(res.Result), "timedOut") {
		t.Errorf("a wait that timed out: %+v", res)
	}
	if res := e.call(abi.MethodProcessSignal, `{"processId": "`+sleep.ProcessID+`"}`); res.Status != abi.StatusDone {
		t.Fatalf("process.signal: %+v", res)
	}
	res = e.call(abi.MethodProcessWait, `{"processId": "`+sleep.ProcessID+`"}`)
	if err := msgpack.Unmarshal(res.Result, &w); err != nil || w.Process.Signal != "SIGTERM" {
		t.Errorf("after TERM: %+v (%v)", w.Process, err)
	}

	for _, c := range []struct{ tool, args, want string }{
		{abi.MethodProcessSpawn, `{}`, "process.spawn: give argv (a list), command (a shell line) or skill (a name)"},
		{abi.MethodProcessSpawn, `{"skill": "nope"}`, "process.spawn: no skill named \"nope\"; `kairo tools` lists the skills"},
		{abi.MethodProcessSpawn, `[1]`, "process.spawn: arguments are not a JSON object"},
		{abi.MethodProcessKill, `{"processId": "nope"}`, `no process "nope"`},
		{abi.MethodProcessWait, `{}`, "processId is empty"},
		{"nothing", `{}`, `unknown tool "nothing"; the tools are: process.kill, process.signal`},
	} {
		if res := e.call(c.tool, c.args); res.Status != abi.StatusFailed || !strings.Contains(res.Error, c.want) {
			t.Errorf("%s %s: %+v, want an error saying %q", c.tool, c.args, res, c.want)
		}
	}
	// Without a session there is nobody to own a process.
	if res := e.reg.Call(context.Background(), tools.Invocation{ActionID: "a", Tool: abi.MethodProcessStatus}); !strings.Contains(res.Error, "no kernel session") {
		t.Errorf("no session: %+v", res)
	}
}

// A wasm tool plugin's tool answers, or fails with its error; a tool it
// does not have is an error that lists the tools.
func TestPluginTool(t *testing.T) {
	e := newEnv(t, tools.Config{}, map[string]string{"toolbox": ""})
	res := e.call("toolbox.echo", `{"x": 1}`)
	var s string
	if err := msgpack.Unmarshal(res.Result, &s); err != nil || res.Status != abi.StatusDone || s != `{"x": 1}` {
		t.Fatalf("toolbox.echo: %+v %q (%v)", res, s, err)
	}
	if res := e.call("toolbox.fail", `{}`); res.Status != abi.StatusFailed || res.Error != "asked to fail" {
		t.Errorf("toolbox.fail: %+v", res)
	}
	if res := e.call("toolbox.nope", `{}`); res.Status != abi.StatusFailed || !strings.Contains(res.Error, `unknown tool "toolbox.nope"; the tools are: `) || !strings.Contains(res.Error, "toolbox.echo") {
		t.Errorf("toolbox.nope: %+v", res)
	}
	if res := e.call("elsewhere.echo", `{}`); !strings.Contains(res.Error, `unknown tool "elsewhere.echo"`) {
		t.Errorf("elsewhere.echo: %+v", res)
	}
	// The same actionId is the same call: asked twice at once, it runs
	// once and both get its result.
	var wg sync.WaitGroup
	results := make([]abi.ToolResultEvent, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.reg.Call(context.Background(), tools.Invocation{ActionID: "same", Tool: "toolbox.sleep", Args: `{"ms": 100}`, Session: e.sess})
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.Status != abi.StatusDone {
			t.Errorf("a call of one actionId: %+v", r)
		}
	}
}

// A plugin that traps in the middle of a call, or runs past its deadline,
// fails that call with an error that says so, at once; the other plugins
// serve on, and the plugin serves again once the host has restarted it.
func TestPluginFailsMidCall(t *testing.T) {
	for _, c := range []struct{ tool, says string }{
		{"crash", "it failed: plugin toolbox: handle: trap"},
		{"loop", "deadline"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			e := newEnv(t, tools.Config{}, map[string]string{"toolbox": "[limits]\ndeadline = \"300ms\"", "toolbox2": ""})
			start := time.Now()
			res := e.call("toolbox."+c.tool, `{}`)
			if res.Status != abi.StatusFailed || !strings.Contains(res.Error, "tool plugin toolbox ended before it answered") || !strings.Contains(res.Error, c.says) {
				t.Fatalf("toolbox.%s: %+v", c.tool, res)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the failure took %v to fail the call", d)
			}
			// The control: another plugin answers meanwhile.
			if res := e.call("toolbox2.echo", `"ok"`); res.Status != abi.StatusDone {
				t.Errorf("toolbox2.echo while toolbox restarts: %+v", res)
			}
			e.waitRestarted("toolbox")
			if res := e.call("toolbox.echo", `"ok"`); res.Status != abi.StatusDone {
				t.Errorf("toolbox.echo after the restart: %+v", res)
			}
		})
	}
}

// The calls of one decision run side by side: two slow calls take about
// as long as one, whether they go to two plugins or wait for two
// processes.
func TestParallelCalls(t *testing.T) {
	e := newEnv(t, tools.Config{}, map[string]string{"toolbox": "", "toolbox2": ""})
	// Calls one after the other take 2×slow at least; side by side, slow
	// and the overhead, which a loaded machine may stretch to a second.
	const slow = 2 * time.Second
	timed := func(calls ...[2]string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if res := e.call(c[0], c[1]); res.Status != abi.StatusDone {
					t.Errorf("%s: %+v", c[0], res)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	if d := timed([2]string{"toolbox.sleep", `{"ms": 2000}`}, [2]string{"toolbox2.sleep", `{"ms": 2000}`}); d >= slow*3/2 {
		t.Errorf("two plugin calls of %v each took %v together", slow, d)
	}
	// One plugin that answers in a later batch serves both at once too.
	if d := timed([2]string{"toolbox.sleep", `{"ms": 2000}`}, [2]string{"toolbox.sleep", `{"ms": 2000}`}); d >= slow*3/2 {
		t.Errorf("two calls of %v each to one plugin took %v together", slow, d)
	}
	a := e.call(abi.MethodProcessSpawn, `{"command": "exec sleep 2"}`)
	b := e.call(abi.MethodProcessSpawn, `{"command": "exec sleep 2"}`)
	if d := timed([2]string{abi.MethodProcessWait, `{"processId": "` + a.ProcessID + `"}`}, [2]string{abi.MethodProcessWait, `{"processId": "` + b.ProcessID + `"}`}); d >= slow*3/2 {
		t.Errorf("two waits for processes of %v each took %v together", slow, d)
	}
}

// A call that outlasts the timeout fails when it runs out, with an error
// that names the timeout, whatever the tool does meanwhile; the tool's late
// answer is dropped and the next call is answered.
func TestTimeout(t *testing.T) {
	e := newEnv(t, tools.Config{Timeout: 200 * time.Millisecond}, map[string]string{"toolbox": ""})
	release := make(chan struct{})
	deaf := &fakeServer{tools: []abi.Tool{{Name: "hang"}}, call: func(context.Context, string, string) (string, bool, error) {
		<-release // heeds no context
		return "late", false, nil
	}}
	if err := e.reg.AddSource("deaf", deaf, "", nil); err != nil {
		t.Fatal(err)
	}
	defer close(release)
	// The tool answers after 3 s (the deaf one never): a call that
	// returns before that returned at its timeout, however loaded the
	// machine.
	for _, tool := range []string{"toolbox.sleep", "mcp.deaf.hang"} {
		start := time.Now()
		res := e.call(tool, `{"ms": 3000}`)
		if d := time.Since(start); d >= 3*time.Second {
			t.Errorf("%s returned after %v, past the timeout of 200ms: it waited for the tool", tool, d)
		}
		if res.Status != abi.StatusFailed || !strings.Contains(res.Error, "no result within 200ms, the timeout of a tool call") {
			t.Errorf("%s: %+v", tool, res)
		}
	}
	time.Sleep(3 * time.Second) // the plugin's late answers come and go
	if res := e.call("toolbox.echo", `"ok"`); res.Status != abi.StatusDone {
		t.Errorf("toolbox.echo after the timeouts: %+v", res)
	}

	// The caller's own context ends a call too: in a registry whose
	// timeout, and a tool whose answer, cannot come first, however late a
	// loaded machine runs the cancel.
	e = newEnv(t, tools.Config{Timeout: 10 * time.Minute}, map[string]string{"toolbox": ""})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if res := e.callCtx(ctx, "toolbox.sleep", `{"ms": 600000}`); res.Status != abi.StatusFailed || !strings.Contains(res.Error, "context canceled") {
		t.Errorf("a canceled call: %+v", res)
	}
}

// A result larger than the limit is stored once and referenced: the event
// carries {ref, size, preview}, the file holds the bytes, and tools.result
// and result.read read them back.
func TestLargeResult(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	e := newEnv(t, tools.Config{ResultDir: dir}, map[string]string{"toolbox": ""})
	const size = 200_000
	want := strings.Repeat("0123456789abcdef", size/16+1)[:size]
	var refs []abi.ToolResultRef
	for range 2 {
		res := e.call("toolbox.big", `{"bytes": 200000}`)
		var ref abi.ToolResultRef
		if err := msgpack.Unmarshal(res.Result, &ref); err != nil || res.Status != abi.StatusDone {
			t.Fatalf("toolbox.big: %+v (%v)", res, err)
		}
		if len(res.Result) > 2<<10 {
			t.Errorf("the result event carries %d bytes", len(res.Result))
		}
		refs = append(refs, ref)
	}
	ref := refs[0]
	if refs[1] != ref || ref.Size != size || !strings.HasPrefix(ref.Ref, "sha256:") || ref.Preview != want[:len(ref.Preview)] || len(ref.Preview) != 1024 {
		t.Errorf("refs %+v and %+v", ref, refs[1])
	}
	files, err := os.ReadDir(dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("the results folder holds %v (%v), want one file", files, err)
	}

	var got []byte
	for off := int64(0); ; {
		raw, aerr := e.kernel.Invoke(context.Background(), abi.MethodToolsResult, &kernel.Call{Session: e.sess, Params: mustMsgpack(t, abi.ToolResultParams{Ref: ref.Ref, Offset: off, Limit: 70_000})})
		if aerr != nil {
			t.Fatal(aerr)
		}
		var d abi.ToolResultData
		if err := msgpack.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Data...)
		off += int64(len(d.Data))
		if d.EOF {
			break
		}
	}
	if string(got) != want {
		t.Errorf("tools.result read back %d bytes, not what was stored", len(got))
	}
	res := e.call("result.read", `{"ref": "`+ref.Ref+`", "offset": 16, "limit": 10}`)
	var s string
	if err := msgpack.Unmarshal(res.Result, &s); err != nil || s != "0123456789" {
		t.Errorf("result.read: %+v %q", res, s)
	}
	if res := e.call("result.read", `{"ref": "sha256:nope"}`); !strings.Contains(res.Error, "is not a stored result's reference") {
		t.Errorf("result.read of a bad ref: %+v", res)
	}
	// A large error result is stored too, its event keeping the start.
	big := &fakeServer{tools: []abi.Tool{{Name: "err"}}, call: func(context.Context, string, string) (string, bool, error) {
		return strings.Repeat("e", size), true, nil
	}}
	if err := e.reg.AddSource("big", big, "", nil); err != nil {
		t.Fatal(err)
	}
	res = e.call("mcp.big.err", `{}`)
	if res.Status != abi.StatusFailed || !strings.Contains(res.Error, "(the whole error, 200000 bytes, is stored as sha256:") || len(res.Error) > 2<<10 {
		t.Errorf("a large error: %.200q", res.Error)
	}
}

func mustMsgpack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A name is one tool's: registering another under it is an error that
// names both; a plugin's tool whose name is taken is listed with the
// collision and the call goes to the tool registered first.
func TestCollisions(t *testing.T) {
	e := newEnv(t, tools.Config{}, map[string]string{"process": `echo_as = "spawn"`})
	run := func(context.Context, *tools.Invocation) abi.ToolResultEvent { return abi.ToolResultEvent{} }
	for _, c := range []struct {
		add  func() error
		want string
	}{
		{func() error {
			return e.reg.Add(abi.ToolInfo{Tool: abi.Tool{Name: abi.MethodProcessSpawn}, Source: "memory"}, run)
		},
			"tools: process.spawn is already a tool (from the kernel); give the new one another name"},
		{func() error { return e.reg.AddSource("fs", &fakeServer{}, "a", nil) }, ""},
		{func() error { return e.reg.AddSource("fs", &fakeServer{}, "b", nil) },
			"tools: an MCP server named fs is already registered (a); give each server its own name"},
		{func() error { return e.reg.AddSource("Bad.Name", &fakeServer{}, "", nil) }, `MCP server name "Bad.Name"`},
		{func() error { return e.reg.Add(abi.ToolInfo{Tool: abi.Tool{Name: "mcp.fs.read"}}, run) },
			"tools: mcp.fs.read is in the names of MCP server fs"},
		{func() error {
			return e.reg.Add(abi.ToolInfo{Tool: abi.Tool{Name: "mcp.web.fetch"}, Source: "test"}, run)
		}, ""},
		{func() error { return e.reg.AddSource("web", &fakeServer{}, "", nil) },
			"tools: MCP server web: its tools would share the names of mcp.web.fetch (from the test)"},
	} {
		err := c.add()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if _, err := tools.New(tools.Config{Kernel: e.kernel, Skills: map[string]string{"broken": "/no/such/skill.toml"}}); err == nil || !strings.Contains(err.Error(), "tools: skill broken: read skill manifest") {
		t.Errorf("a skill that does not load: %v", err)
	}

	found := 0
	for _, ti := range e.reg.List() {
		if ti.Name == abi.MethodProcessSpawn && ti.Source == abi.ToolSourceKernel && ti.Error == "" {
			found++
		}
		if ti.Name == abi.MethodProcessSpawn && ti.Source == abi.ToolSourcePlugin {
			found++
			if !strings.Contains(ti.Error, "process.spawn is already a tool (from the kernel), which is the one called; rename plugin process or its tool") {
				t.Errorf("the plugin's colliding tool: %q", ti.Error)
			}
		}
	}
	if found != 2 {
		t.Errorf("the kernel's process.spawn and the plugin's are not both listed: %v", e.reg.List())
	}
	if res := e.call(abi.MethodProcessSpawn, `{"command": "true"}`); res.ProcessID == "" {
		t.Errorf("process.spawn went elsewhere than the kernel: %+v", res)
	}
	// The plugin's other tools are its own.
	if res := e.call("process.echo", `"ok"`); res.Status != abi.StatusDone {
		t.Errorf("process.echo: %+v", res)
	}
}

// A tool that panics or fails yields a failed result; the registry goes
// on.
func TestPanics(t *testing.T) {
	e := newEnv(t, tools.Config{}, nil)
	if err := e.reg.Add(abi.ToolInfo{Tool: abi.Tool{Name: "go.panic"}, Source: "test"}, func(context.Context, *tools.Invocation) abi.ToolResultEvent { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	src := &fakeServer{tools: []abi.Tool{{Name: "panic"}, {Name: "gone"}}, call: func(_ context.Context, tool, _ string) (string, bool, error) {
		if tool == "gone" {
			return "", false, errors.New("the server exited")
		}
		panic("boom")
	}}
	if err := e.reg.AddSource("p", src, "", nil); err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]string{
		"go.panic":    "tool go.panic failed: it panicked: boom",
		"mcp.p.panic": "mcp.p.panic: MCP server p: it panicked: boom",
		"mcp.p.gone":  "mcp.p.gone: MCP server p: the server exited",
		"mcp.q.x":     `unknown tool "mcp.q.x"`,
	} {
		if res := e.call(tool, `{}`); res.Status != abi.StatusFailed || !strings.Contains(res.Error, want) {
			t.Errorf("%s: %+v, want %q", tool, res, want)
		}
	}
	if res := e.call(abi.MethodProcessStatus, `{}`); res.Status != abi.StatusDone {
		t.Errorf("process.status after the panics: %+v", res)
	}
}
