package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Two kairos on one stream: a's embedded server serves it to b. A task sent
// to a runs on a; b's `kairo events tail` shows it, with its
// host; `kairo runs` on either lists it as a's; b's agent leaves it alone;
// and b, asked to kill a's process, says the process is a's. The control:
// a kills it.
func TestTwoHostsOneStream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	homeA, homeB := t.TempDir(), t.TempDir()
	config := func(home, name, store string) {
		text := "[host]\nname = \"" + name + "\"\n[store]\nkind = \"jetstream\"\n[store.jetstream]\n" + store
		if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config(homeA, "a", "embedded = true\nlisten = \"127.0.0.1:"+port+"\"\npeers = [\"b\"]\n")
	// b logs in with the password a made for it at its first start.
	config(homeB, "b", "url = \"nats://127.0.0.1:"+port+"\"\npassword_file = \""+filepath.Join(homeA, "jetstream", "peers", "b.password")+"\"\n")
	upA := startUp(t, homeA)
	startUp(t, homeB) // stopped first: a serves the stream

	// From the first event, so nothing is missed however late it subscribes.
	tail := exec.Command(kairoBin, "events", "tail", "--from", "1", "--json", "kairo.>")
	tail.Env = childEnv(homeB)
	out, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	tail.Stderr = stderr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { tail.Process.Kill(); tail.Wait() }()
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	if r := kairo(t, homeA, "send", "--no-follow", "run sleep 30"); r.code != 0 {
		t.Fatalf("send on a:\n%s", r)
	}
	var proc string
	timeout := time.After(30 * time.Second)
	for proc == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("b's tail ended: %s", stderr)
			}
			var ev struct {
				Type string         `json:"type"`
				Host string         `json:"host"`
				Data map[string]any `json:"data"`
			}
			if json.Unmarshal([]byte(line), &ev) != nil || ev.Type != "kairo.process.spawned" {
				continue
			}
			if ev.Host != "a" {
				t.Fatalf("b's tail shows a's spawn with host %q: %s", ev.Host, line)
			}
			proc, _ = ev.Data["processId"].(string)
		case <-timeout:
			t.Fatalf("b's tail showed no spawn of a's within 30s: %s", stderr)
		}
	}
	if !strings.HasSuffix(proc, "@a") {
		t.Fatalf("a's process is %q; want an id naming its host, pN@a", proc)
	}

	runsOn := func(home string) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := kairo(t, home, "runs")
			if r.code == 0 && regexpMatch(`(?m)^\S+\s+a\s+.*\srun sleep 30$`, r.stdout) {
				return r.stdout
			}
			if time.Now().After(deadline) {
				t.Fatalf("kairo runs on %s does not list a's run loop as a's:\n%s", home, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	runsOn(homeA)
	if list := runsOn(homeB); regexpMatch(`(?m)^\S+\s+b\s`, list) {
		t.Fatalf("b's agent acted on a's message:\n%s", list)
	}

	r := kairo(t, homeB, "kill", proc)
	if r.code == 0 || !strings.Contains(r.stderr, `host "a"`) {
		t.Fatalf("kill of a's process on b: want a refusal naming host \"a\":\n%s", r)
	}
	if r := kairo(t, homeA, "kill", proc); r.code != 0 { // the control
		t.Fatalf("kill of a's process on a:\n%s", r)
	}

	// a stops, and with it the server b's store is on: b refuses writes
	// with a clear error, runs on, and says so in its status.
	if code := upA.stop(); code != 0 {
		t.Fatalf("a's kairo up exited %d", code)
	}
	r = kairo(t, homeB, "events", "publish", "test.after")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot be reached") {
		t.Fatalf("publish on b with the stream away:\n%s", r)
	}
	if r := kairo(t, homeB, "status"); r.code != 0 || !strings.Contains(r.stdout, "REFUSING WRITES: it cannot be reached since") {
		t.Fatalf("status of b with the stream away:\n%s", r)
	}
}
