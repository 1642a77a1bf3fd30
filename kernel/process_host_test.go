package kernel

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/vmihailenco/msgpack/v5"
)

// TestProcessOfAnotherHost: a kernel named "a" gives its processes ids
// "pN@a" and controls them; a call for "p3@b" says that host b runs it and
// how to reach it, for every method that looks a process up; an unknown id
// of its own, the control, stays a plain "no process".
func TestProcessOfAnotherHost(t *testing.T) {
	b := bus.New(bus.NewMemoryStore(0), bus.Config{Host: "a"})
	k := New(b, Config{Host: "a"})
	t.Cleanup(func() { k.Close(); b.Close() })
	operator := &testSession{ctx: t.Context(), caller: Caller{UID: 0}}
	invoke := func(method string, params, out any) *abi.Error {
		t.Helper()
		raw, err := msgpack.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		res, aerr := k.Invoke(t.Context(), method, &Call{Session: operator, Params: raw})
		if aerr == nil && out != nil {
			if err := msgpack.Unmarshal(res, out); err != nil {
				t.Fatal(err)
			}
		}
		return aerr
	}

	var in abi.IntrospectResult
	wantAllowed(t, abi.MethodKernelIntrospect, invoke(abi.MethodKernelIntrospect, nil, &in))
	if in.Host != "a" {
		t.Fatalf("kernel.introspect names the host %q, want \"a\"", in.Host)
	}

	var info abi.ProcessInfo
	wantAllowed(t, "spawn", invoke(abi.MethodProcessSpawn, abi.SpawnParams{Argv: []string{"/bin/sleep", "30"}}, &info))
	if !regexp.MustCompile(`^p[0-9]+@a$`).MatchString(info.ID) {
		t.Fatalf("the process id is %q, want pN@a", info.ID)
	}
	wantAllowed(t, "process.status of its own", invoke(abi.MethodProcessStatus, abi.ProcessRef{ProcessID: info.ID}, nil))
	wantAllowed(t, "process.attach to its own", invoke(abi.MethodProcessAttach, abi.ProcessRef{ProcessID: info.ID}, nil))
	wantDenied(t, "process.resize of its own, no terminal", invoke(abi.MethodProcessResize, abi.ResizeParams{ProcessID: info.ID, Cols: 80, Rows: 24}, nil), "has no terminal")

	for _, tc := range []struct {
		method string
		params func(id string) any
	}{
		{abi.MethodProcessStatus, func(id string) any { return abi.ProcessRef{ProcessID: id} }},
		{abi.MethodProcessAttach, func(id string) any { return abi.ProcessRef{ProcessID: id} }},
		{abi.MethodProcessKill, func(id string) any { return abi.ProcessRef{ProcessID: id} }},
		{abi.MethodProcessSignal, func(id string) any { return abi.SignalParams{ProcessID: id, Signal: "TERM"} }},
		{abi.MethodProcessStdinWrite, func(id string) any { return abi.StdinParams{ProcessID: id, Data: []byte("x")} }},
		{abi.MethodProcessResize, func(id string) any { return abi.ResizeParams{ProcessID: id, Cols: 80, Rows: 24} }},
		{abi.MethodProcessWait, func(id string) any { return abi.WaitParams{ProcessID: id} }},
	} {
		aerr := invoke(tc.method, tc.params("p3@b"), nil)
		want := `process p3@b runs on host "b", not on this one ("a"): control it with the kairo of that host (KAIRO_HOME there, or its socket)`
		if aerr == nil || aerr.Code != abi.CodeNotFound || aerr.Message != want {
			t.Errorf("%s p3@b: %v; want %s %q", tc.method, aerr, abi.CodeNotFound, want)
		}
		aerr = invoke(tc.method, tc.params("p999@a"), nil)
		if aerr == nil || aerr.Code != abi.CodeNotFound || !strings.HasPrefix(aerr.Message, `no process "p999@a"`) {
			t.Errorf("%s p999@a: %v; want %s no process", tc.method, aerr, abi.CodeNotFound)
		}
	}

	wantAllowed(t, "process.kill of its own", invoke(abi.MethodProcessKill, abi.ProcessRef{ProcessID: info.ID}, nil))
	var w abi.WaitResult
	wantAllowed(t, "process.wait of its own", invoke(abi.MethodProcessWait, abi.WaitParams{ProcessID: info.ID}, &w))
	if w.Process.ID != info.ID {
		t.Fatalf("process.wait answered for %q, want %q", w.Process.ID, info.ID)
	}
	// What it published carries its name.
	var hosts []string
	b.Replay(t.Context(), bus.Query{}, func(ev *abi.Event) error {
		if ev.Host != "a" {
			hosts = append(hosts, ev.Type+" host "+ev.Host)
		}
		return nil
	})
	if len(hosts) > 0 {
		t.Fatalf("events without the host a: %q", hosts)
	}
}

// TestProcessOfAHostFromOneWithout: a kernel without a host name still
// tells another host's process apart, and says it has no name.
func TestProcessOfAHostFromOneWithout(t *testing.T) {
	k := newTestKernel(t)
	aerr := call(t, k, Caller{}, abi.MethodProcessStatus, abi.ProcessRef{ProcessID: "p3@b"}, nil)
	wantDenied(t, "process.status p3@b", aerr, `process p3@b runs on host "b", not on this one (which has no host name)`)
	var info abi.ProcessInfo
	wantAllowed(t, "spawn", call(t, k, Caller{}, abi.MethodProcessSpawn, abi.SpawnParams{Argv: []string{"/bin/true"}}, &info))
	if !regexp.MustCompile(`^p[0-9]+$`).MatchString(info.ID) {
		t.Fatalf("the process id is %q, want pN", info.ID)
	}
}
