package host_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/internal/testkit/observe"
)

// scrape is observe.Scrape.
func scrape(t *testing.T, url, series string) (float64, string) {
	return observe.Scrape(t, url, series)
}

// A daemon with [telemetry] metrics_listen serves its health at /metrics:
// a task that runs `echo hi` moves the tool calls and the processes, and
// the daemon's parts show (its agent's run loops, its store). The
// endpoint serves /metrics alone. A second daemon on the same port fails
// to start, naming the setting; a non-loopback address is refused at
// load unless allow_remote says so (with allow_remote, the control).
func TestDaemonServesMetrics(t *testing.T) {
	t.Parallel()
	d := startWith(t, t.TempDir(), "[telemetry]\nmetrics_listen = \"127.0.0.1:0\"\n")
	addr := d.MetricsAddr()
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("MetricsAddr = %q; want the port it bound", addr)
	}
	url := "http://" + addr + "/metrics"
	const spawned = `kairo_tool_calls_total\{status="done",tool="process\.spawn"\}`
	before, _ := scrape(t, url, spawned)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, _ := msgpack.Marshal(abi.UserMessage{Text: "run echo hi", MessageID: abi.NewID()})
	if _, err := d.Kernel().Bus.Publish(ctx, &abi.Event{Type: abi.SubjectUserMessage, Source: "test", Data: raw}); err != nil {
		t.Fatal(err)
	}
	for {
		calls, _ := scrape(t, url, spawned)
		ok, body := scrape(t, url, `kairo_processes_total\{outcome="ok"\}`)
		if calls > max(before, 0) && ok >= 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no spawn counted within 60s (before: %v, now: %v, processes ok: %v):\n%s", before, calls, ok, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, body := scrape(t, url, "")
	for _, want := range []string{
		`kairo_run_loops{agent="default",state="open"}`, `kairo_store_state{state="writable"} 1`, "kairo_store_wal_bytes ",
		"kairo_approvals_pending 0", `kairo_agent_tick_lag_seconds{agent="default"}`, "kairo_events_published_total ", "go_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	res, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /: %s; want 404", res.Status)
	}

	taken := t.TempDir()
	tcfg, err := loadConfig(t, taken, "[telemetry]\nmetrics_listen = \""+addr+"\"\n")
	if err != nil {
		t.Fatal(err)
	}
	second := host.New(host.Config{Home: taken, Config: tcfg})
	if err := second.Start(); err == nil || !strings.Contains(err.Error(), "[telemetry] metrics_listen") {
		second.Stop(context.Background())
		t.Errorf("a daemon whose metrics port is taken: %v; want an error naming [telemetry] metrics_listen", err)
	}

	if _, err := loadConfig(t, t.TempDir(), "[telemetry]\nmetrics_listen = \"0.0.0.0:9464\"\n"); err == nil || !strings.Contains(err.Error(), "telemetry.metrics_listen") || !strings.Contains(err.Error(), "allow_remote = true") {
		t.Errorf("metrics_listen on every address without allow_remote: %v; want it refused", err)
	}
	if _, err := loadConfig(t, t.TempDir(), "[telemetry]\nmetrics_listen = \"0.0.0.0:9464\"\nallow_remote = true\n"); err != nil {
		t.Errorf("metrics_listen on every address with allow_remote: %v", err)
	}
}
