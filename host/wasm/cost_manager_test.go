package wasm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// A plugin that goes past a cap under the manager is failed and restarted
// with backoff like any other failure, the cap named in
// kairo.plugin.failed; the neighbour serves throughout; the same plugin
// within the cap serves on.
func TestCapFailureIsReportedAndRestarted(t *testing.T) {
	e := newManagerEnv(t)
	failed := e.watch("kairo.plugin.failed")
	echoes := e.watch("echo.>")
	e.drop("hostile", "hostile", hostile("cost", `["kernel.ping"]`, "calls = 1\ncallSize = 2097152\n"))
	e.drop("control", "hostile", control(hostile("cost", `["kernel.ping"]`, "calls = 1\ncallSize = 1024\n")))
	e.drop("echo", "echo", echoManifest)
	e.start(ManagerConfig{})
	e.waitState("hostile", abi.PluginRunning)
	e.waitState("control", abi.PluginRunning)

	e.publish("boom.now", 1)
	f := decode[abi.PluginFailed](t, failed.wait(t, 1)[0])
	if f.Plugin != "hostile" || f.Op != "handle" || f.Reason != string(ReasonLimit) || !strings.Contains(f.Error, "InstanceConfig.MaxCallArgs") || f.RestartIn == 0 {
		t.Fatalf("failed = %+v; want the hostile plugin failed on InstanceConfig.MaxCallArgs, restarting", f)
	}
	t.Log(f.Error)
	e.publish("demo.after", 1)
	echoes.wait(t, 1)
	if s := e.waitState("hostile", abi.PluginRunning); s.Restarts != 1 {
		t.Fatalf("status after the restart = %+v", s)
	}
	if s := e.status("control"); s.State != abi.PluginRunning || s.Failures != 0 {
		t.Fatalf("the control = %+v", s)
	}
	for _, ev := range failed.wait(t, 1) {
		if decode[abi.PluginFailed](t, ev).Plugin == "control" {
			t.Fatalf("the control failed: %+v", decode[abi.PluginFailed](t, ev))
		}
	}
}

// control is a hostile manifest for a second instance named control.
func control(manifest string) string {
	return strings.Replace(manifest, `name = "hostile"`, `name = "control"`, 1) + "name = \"control\"\n"
}

// A batch that runs into the publish cap is refused past it and reported as
// one kairo.plugin.throttled event with the count, not silently; a batch
// within it reports nothing.
func TestThrottledIsReported(t *testing.T) {
	e := newManagerEnv(t)
	throttled := e.watch("kairo.plugin.throttled")
	e.drop("hostile", "hostile", hostile("cost", `["kernel.ping"]`, "publishes = 1100\nsubject = \"ping.cost\"\n"))
	e.drop("control", "hostile", control(hostile("cost", `["kernel.ping"]`, "publishes = 100\nsubject = \"ping.cost\"\n")))
	e.start(ManagerConfig{})
	e.waitState("hostile", abi.PluginRunning)
	e.waitState("control", abi.PluginRunning)

	e.publish("boom.one", 1)
	e.publish("boom.two", 2)
	evs := throttled.wait(t, 1)
	tr := decode[abi.PluginThrottled](t, evs[0])
	if tr.Plugin != "hostile" || len(tr.Caps) != 1 || tr.Caps[0] != (abi.PluginCap{Cap: "publishes", Limit: 1024, Over: 76}) {
		t.Fatalf("throttled = %+v", tr)
	}
	time.Sleep(200 * time.Millisecond)
	evs = throttled.wait(t, 1)
	if len(evs) > 2 { // one per batch: the two events may share one
		t.Fatalf("%d throttled events for two batches", len(evs))
	}
	for _, ev := range evs {
		if p := decode[abi.PluginThrottled](t, ev).Plugin; p != "hostile" {
			t.Fatalf("throttled event of %s", p)
		}
	}
	for _, name := range []string{"hostile", "control"} {
		if s := e.status(name); s.State != abi.PluginRunning {
			t.Fatalf("%s = %+v", name, s)
		}
	}
}

// pendingServices is how many service calls the manager keeps unanswered,
// and for how many callers.
func pendingServices(m *Manager) (calls, callers int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.svc.pending), len(m.svc.byCaller)
}

// A plugin that calls its own service in a loop and never answers holds at
// most maxPendingServices calls: past them its calls fail at once with an
// error naming the bound, and each waiting call fails at its deadline; the
// host keeps serving, and the table empties. The control makes as many
// calls as the table holds: none is refused.
func TestServiceCallsAreBounded(t *testing.T) {
	defer func(d time.Duration) { serviceDeadline = d }(serviceDeadline)
	serviceDeadline = 500 * time.Millisecond
	for _, c := range []struct {
		name  string
		calls int
	}{{"hoarder", 100}, {"control", maxPendingServices}} {
		t.Run(c.name, func(t *testing.T) {
			e := newManagerEnv(t)
			results := e.watch("ping.result")
			echoes := e.watch("echo.>")
			e.drop("hostile", "hostile", hostile("hoard", `["hostile.hoard"]`, fmt.Sprintf("calls = %d\n", c.calls)))
			e.drop("echo", "echo", echoManifest)
			e.start(ManagerConfig{})
			e.waitState("hostile", abi.PluginRunning)

			e.publish("boom.go", 1)
			evs := results.wait(t, c.calls)
			var refused, expired int
			for _, ev := range evs {
				r := decode[result](t, ev)
				switch {
				case strings.Contains(r.Error, "maxPendingServices"):
					refused++
				case strings.Contains(r.Error, "did not answer within 500ms (host serviceDeadline)"):
					expired++
				default:
					t.Fatalf("result %+v", r)
				}
			}
			if want := c.calls - maxPendingServices; refused != want || expired != maxPendingServices {
				t.Fatalf("%d refused, %d expired; want %d and %d", refused, expired, want, maxPendingServices)
			}
			t.Log(decode[result](t, evs[0]).Error)
			if calls, callers := pendingServices(e.m); calls != 0 || callers != 0 {
				t.Fatalf("%d calls of %d callers still pending", calls, callers)
			}
			e.publish("demo.after", 1)
			echoes.wait(t, 1)
			if s := e.status("hostile"); s.State != abi.PluginRunning {
				t.Fatalf("status = %+v", s)
			}
		})
	}
}

// The service calls a plugin waits for are dropped when it is unloaded.
func TestServiceCallsFreedOnUnload(t *testing.T) {
	e := newManagerEnv(t)
	e.drop("hostile", "hostile", hostile("hoard", `["hostile.hoard"]`, "calls = 10\n"))
	e.start(ManagerConfig{})
	e.waitState("hostile", abi.PluginRunning)
	e.publish("boom.go", 1)
	waitPending := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			calls, _ := pendingServices(e.m)
			if calls == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d service calls pending, want %d", calls, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitPending(10)
	for _, f := range []string{"hostile.wasm", "hostile.toml"} {
		if err := os.Remove(filepath.Join(e.dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	e.m.Rescan()
	waitPending(0)
	if _, callers := pendingServices(e.m); callers != 0 {
		t.Fatalf("%d callers still counted", callers)
	}
}
