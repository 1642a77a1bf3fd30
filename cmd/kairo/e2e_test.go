package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	_ "modernc.org/sqlite"
)

// TestEndToEnd drives a real daemon with the real CLI: publish, replay,
// tail, a second daemon on the same home, a clean stop.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)

	if !strings.Contains(d.stderr.String(), "socket="+d.socket()) || !strings.Contains(d.stderr.String(), "store=sqlite:"+filepath.Join(home, "events.db")) {
		t.Errorf("the startup log does not say where the socket and the store are:\n%s", d.stderr)
	}

	published := []struct {
		id, subject, data string
	}{
		{"e1", "test.order.created", `{"n":1,"name":"first","tags":["a","b"]}`},
		{"e2", "test.order.paid", `{"n":2,"amount":12.5,"ok":true,"none":null}`},
		{"e3", "test.note", ``},
	}
	seqs := map[string]uint64{}
	// The operator's ids are stored in its scope, as every publisher's.
	scope := fmt.Sprintf("operator/%d:", os.Getuid())
	for _, p := range published {
		args := []string{"events", "publish", "--id", p.id, "--correlation", "run-1", p.subject}
		if p.data != "" {
			args = append(args, p.data)
		}
		r := kairo(t, home, args...)
		m := regexp.MustCompile(`^published seq=(\d+) id=` + regexp.QuoteMeta(scope+p.id) + `\n$`).FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil {
			t.Fatalf("publish %s: %s", p.id, r)
		}
		seqs[p.id], _ = strconv.ParseUint(m[1], 10, 64)
	}

	// Publishing an ID again stores nothing and names the stored event.
	r := kairo(t, home, "events", "publish", "--json", "--id", "e1", "test.order.created", `{"n":99}`)
	var dup struct {
		Seq       uint64 `json:"seq"`
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &dup); err != nil || !dup.Duplicate || dup.Seq != seqs["e1"] || dup.ID != scope+"e1" {
		t.Errorf("duplicate publish: %+v, %v\n%s", dup, err, r)
	}

	// A second daemon on the same home is refused, naming the first.
	r = kairo(t, home, "up", "--home", home)
	if r.code != 1 || !strings.Contains(r.stderr, "kairo: another `kairo up` is running on "+home) ||
		!strings.Contains(r.stderr, fmt.Sprintf("pid %d", d.cmd.Process.Pid)) {
		t.Errorf("second kairo up: want exit 1 naming pid %d:\n%s", d.cmd.Process.Pid, r)
	}

	// tail sees an event published after it subscribed.
	tailLine := tailOne(t, d, "test.tail", `{"x":1}`)
	if !regexp.MustCompile(`^\[\d+\] \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\S* test\.tail operator/\d+ \{"x":1\}$`).MatchString(tailLine) {
		t.Errorf("tail line %q is not [seq] time type source data", tailLine)
	}

	// replay --json has them all, in order, with their data.
	r = kairo(t, home, "events", "replay", "--json", "test.>")
	if r.code != 0 {
		t.Fatalf("replay: %s", r)
	}
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("replay line %q: %v", line, err)
		}
		got = append(got, ev)
	}
	if len(got) != 4 {
		t.Fatalf("replay gave %d events, want 4:\n%s", len(got), r.stdout)
	}
	for i, p := range published {
		ev := got[i]
		if ev["id"] != scope+p.id || ev["type"] != p.subject || ev["source"] != fmt.Sprintf("operator/%d", os.Getuid()) || ev["correlationId"] != "run-1" ||
			ev["seq"] != float64(seqs[p.id]) {
			t.Errorf("event %d = %v, want id %s type %s seq %d", i, ev, p.id, p.subject, seqs[p.id])
		}
		var want any
		if p.data != "" {
			json.Unmarshal([]byte(p.data), &want)
		}
		if !reflect.DeepEqual(ev["data"], want) {
			t.Errorf("event %s data = %#v, want %#v", p.id, ev["data"], want)
		}
		for _, k := range []string{"time", "causationId"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("event %s has no %q field", p.id, k)
			}
		}
	}
	if got[3]["type"] != "test.tail" {
		t.Errorf("last event is %v, want the tailed one", got[3])
	}
	// Key order survives the trip through MsgPack.
	if !strings.Contains(r.stdout, `"data":{"n":1,"name":"first","tags":["a","b"]}`) {
		t.Errorf("replay does not keep the data's key order:\n%s", r.stdout)
	}

	// Filters: sequence range, limit, time.
	r = kairo(t, home, "events", "replay", "--from", strconv.FormatUint(seqs["e2"], 10), "--limit", "1", "test.>")
	if r.code != 0 || !strings.HasPrefix(r.stdout, fmt.Sprintf("[%d] ", seqs["e2"])) || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("replay --from --limit: %s", r)
	}
	r = kairo(t, home, "events", "replay", "--since", "1h", "kairo.system.*")
	if r.code != 0 || !strings.Contains(r.stdout, "kairo.system.started kernel {\"version\":\"dev\",\"pid\":") {
		t.Errorf("replay --since: %s", r)
	}
	r = kairo(t, home, "events", "replay", "--to", "1", "--since", "1ns")
	if r.code != 0 || r.stdout != "" {
		t.Errorf("replay of a past nanosecond should print nothing: %s", r)
	}

	if r := kairo(t, home, "ping"); r.code != 0 || !strings.HasPrefix(r.stdout, "pong from "+d.socket()) {
		t.Errorf("ping: %s", r)
	}
	r = kairo(t, home, "status", "--json")
	var st statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Version != "dev" || st.ABIVersion != abi.Version || !st.Ready ||
		st.Metrics.LastSeq < seqs["e3"] || !strings.HasPrefix(st.Metrics.Store, "sqlite:") {
		t.Errorf("status --json: %+v %v\n%s", st, err, r)
	}
	if r := kairo(t, home, "status"); r.code != 0 || !regexpMatch(`(?m)^runtime\s+\d+ goroutines, \d+\.\d (KiB|MiB|GiB) heap$`, r.stdout) ||
		!regexpMatch(`(?m)^kernel\s+dev \(ABI \d+\), up \S+, ready$`, r.stdout) {
		t.Errorf("status: the heap in human units:\n%s", r)
	}

	// SIGTERM: a clean stop, announced on the bus.
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d after SIGTERM, want 0\n%s", code, d.stderr)
	}
	if !strings.HasSuffix(d.stderr.String(), "kairo: stopped\n") {
		t.Errorf("kairo up did not end with \"kairo: stopped\":\n%s", d.stderr)
	}
	db, err := sql.Open("sqlite", filepath.Join(home, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var last string
	if err := db.QueryRow(`SELECT type FROM events ORDER BY seq DESC LIMIT 1`).Scan(&last); err != nil || last != "kairo.system.stopping" {
		t.Errorf("last stored event is %q (%v), want kairo.system.stopping", last, err)
	}

	// With no daemon, a client says so and how to start one.
	r = kairo(t, home, "events", "replay")
	if r.code != 1 || !strings.Contains(r.stderr, "kairo: the kernel is not running") || !strings.Contains(r.stderr, "kairo up") {
		t.Errorf("replay without a daemon: %s", r)
	}
}

// tailOne starts `kairo events tail 'test.>'`, waits until its subscription
// is open, publishes one event, and returns the line tail printed for it.
// Then it interrupts tail and checks it exits 0.
func tailOne(t *testing.T, d *upProc, subject, data string) string {
	t.Helper()
	c := d.dial()
	defer c.Close()
	subscriptions := func() int {
		var m abi.Metrics
		if err := c.Call(context.Background(), abi.MethodSystemMetrics, nil, &m); err != nil {
			t.Fatal(err)
		}
		return m.Subscriptions
	}
	// The agent and the plugins hold subscriptions of their own.
	before := subscriptions()
	cmd := exec.Command(kairoBin, "events", "tail", "test.>")
	cmd.Env = childEnv(d.home)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	// The subscription is open once the kernel counts it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if subscriptions() > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tail did not subscribe within 30s: %s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if r := kairo(t, d.home, "events", "publish", subject, data); r.code != 0 {
		t.Fatalf("publish: %s", r)
	}
	var line string
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("tail ended without printing the event: %s", stderr)
		}
		line = l
	case <-time.After(10 * time.Second):
		t.Fatalf("tail printed nothing within 10s: %s", stderr)
	}

	cmd.Process.Signal(syscall.SIGINT)
	for range lines { // read to EOF before Wait closes the pipe
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("tail after SIGINT: %v, want exit 0: %s", err, stderr)
	}
	return line
}
