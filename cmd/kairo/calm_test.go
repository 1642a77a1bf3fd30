package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/kairo-os/kairo/sdk/client"
)

// ptyUp is a `kairo up` whose stdin, stdout and stderr are a pseudo-
// terminal, as when a person runs it.
type ptyUp struct {
	t      *testing.T
	home   string
	cmd    *exec.Cmd
	tty    *os.File // the terminal's master side
	out    *syncBuffer
	exited chan struct{}
	err    error
}

// startUpPTY starts `kairo up --home home args...` on an 80-column
// pseudo-terminal and returns once the chat prompt shows and the socket
// answers.
func startUpPTY(t *testing.T, home string, args ...string) *ptyUp {
	t.Helper()
	d := &ptyUp{t: t, home: home, out: &syncBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(kairoBin, append([]string{"up", "--home", home}, args...)...)
	d.cmd.Env = childEnv(home)
	tty, err := pty.StartWithSize(d.cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	d.tty = tty
	copied := make(chan struct{})
	go func() { // ends when the terminal closes: EIO once the daemon exits
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			d.out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	go func() {
		d.err = d.cmd.Wait()
		<-copied
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Kill()
			<-d.exited
		}
		tty.Close()
	})
	d.waitFor("you> ", 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, filepath.Join(home, "kernel.sock"))
	if err != nil {
		t.Fatalf("the chat shows but the socket does not answer: %v\n%q", err, d.out)
	}
	c.Close()
	return d
}

// waitFor waits until the terminal has shown s.
func (d *ptyUp) waitFor(s string, within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(d.out.String(), s) {
		select {
		case <-d.exited:
			d.t.Fatalf("kairo up exited before it showed %q: %v\n%q", s, d.err, d.out)
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("kairo up did not show %q within %v:\n%q", s, within, d.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop presses Ctrl-C and waits for the daemon to exit.
func (d *ptyUp) stop() {
	d.t.Helper()
	d.tty.Write([]byte{3})
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Signal(syscall.SIGKILL)
		d.t.Fatalf("kairo up did not stop on Ctrl-C:\n%q", d.out)
	}
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		d.t.Fatalf("kairo up exited %d:\n%q", ee.ExitCode(), d.out)
	}
}

// structured matches a line of slog's text or JSON form.
var structured = regexp.MustCompile(`level=(INFO|WARN)|"level":"(INFO|WARN)"`)

// On a terminal, kairo up says in one line that it is up and opens the
// chat: no structured log there. The log is in kairo.log under the home;
// a warning the user must see (kairo.toml configures a plugin that is not
// installed) is one short line. The controls: with -v and with
// --log-format json the structured log is on the terminal too, and with
// stderr not a terminal (startUp) it is on stderr.
func TestCalmTerminal(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte("[plugins.nosuch]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUpPTY(t, home)
	d.stop()
	out := d.out.String()
	logPath := filepath.Join(home, "kairo.log")
	if m := structured.FindString(out); m != "" {
		t.Errorf("the terminal shows the structured log (%s):\n%s", m, out)
	}
	for _, want := range []string{
		"kairo is up in ", "log " + logPath,
		"Talk to the agent here",
		"kairo: kairo.toml has [plugins.nosuch], but no plugin of that name is installed",
		"kairo: stopped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSuffix(line, "\r"); strings.HasPrefix(line, "kairo: kairo.toml has") && len([]rune(line)) > 79 {
			t.Errorf("the warning is %d characters, more than the terminal's 80 columns: %q", len([]rune(line)), line)
		}
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("no log file under the home: %v", err)
	}
	for _, want := range []string{`level=INFO msg="kairo is up"`, `level=WARN msg="kairo.toml has [plugins.nosuch], but no plugin of that name is installed"`, `msg="stopping; a second signal kills"`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("kairo.log lacks %q:\n%s", want, log)
		}
	}

	// -v: the structured log on the terminal too, and still in the file.
	d = startUpPTY(t, home, "-v")
	d.stop()
	if out := d.out.String(); !strings.Contains(out, `level=INFO msg="kairo is up"`) || !strings.Contains(out, "level=WARN") || strings.Contains(out, "kairo: kairo.toml has") {
		t.Errorf("kairo up -v should show the structured log, and each warning once:\n%s", out)
	}
	if log2, _ := os.ReadFile(logPath); strings.Count(string(log2), `msg="kairo is up"`) != 2 {
		t.Errorf("kairo.log should hold both starts:\n%s", log2)
	}

	// --log-format json: the terminal and the file get JSON lines.
	home = t.TempDir()
	d = startUpPTY(t, home, "--log-format", "json")
	d.stop()
	if out := d.out.String(); !strings.Contains(out, `"level":"INFO","msg":"kairo is up"`) {
		t.Errorf("kairo up --log-format json does not show JSON lines:\n%s", out)
	}
	if log, _ := os.ReadFile(filepath.Join(home, "kairo.log")); !strings.Contains(string(log), `"msg":"kairo is up"`) {
		t.Errorf("kairo.log is not JSON with --log-format json:\n%s", log)
	}
	if r := kairo(t, home, "up", "--log-format", "yaml"); r.code != 2 || !strings.Contains(r.stderr, `--log-format "yaml": give text or json`) {
		t.Errorf("kairo up --log-format yaml:\n%s", r)
	}

	// Not a terminal: structured lines on stderr, for whatever reads them.
	home = t.TempDir()
	p := startUp(t, home)
	p.stop()
	if !strings.Contains(p.stderr.String(), `level=INFO msg="kairo is up"`) {
		t.Errorf("kairo up with stderr not a terminal does not log there:\n%s", p.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "kairo.log")); err != nil {
		t.Errorf("no log file when stderr is not a terminal: %v", err)
	}
}

// The log file is bounded: past its cap it becomes kairo.log.1, replacing
// the one before, so the log never takes more than twice the cap.
func TestLogFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kairo.log")
	l, err := openLogFile(path, 1000, func(err error) { t.Errorf("a write failed: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	line := []byte(strings.Repeat("x", 99) + "\n")
	for i := 0; i < 35; i++ {
		l.Write(line)
	}
	cur, err1 := os.Stat(path)
	old, err2 := os.Stat(path + ".1")
	if err1 != nil || err2 != nil {
		t.Fatalf("after 3500 bytes with a cap of 1000: %v, %v", err1, err2)
	}
	// The control: each file is under the cap, and the newest lines are there.
	if cur.Size() != 500 || old.Size() != 1000 {
		t.Errorf("kairo.log is %d bytes and kairo.log.1 %d; want 500 and 1000", cur.Size(), old.Size())
	}
	if _, err := os.Stat(path + ".2"); err == nil {
		t.Error("a second old file: the log should keep one")
	}
}

// A log file that cannot be written (a full disk: /dev/full) loses lines
// but never fails the logger: the failure is said once, not per line.
func TestLogFileFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kairo.log")
	if err := os.Symlink("/dev/full", path); err != nil {
		t.Fatal(err)
	}
	var failures []error
	l, err := openLogFile(path, 1000, func(err error) { failures = append(failures, err) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 3; i++ {
		if n, err := l.Write([]byte("a line\n")); n != 7 || err != nil {
			t.Errorf("Write = %d, %v; want 7, nil: a log write must not fail its caller", n, err)
		}
	}
	if len(failures) != 1 || !errors.Is(failures[0], syscall.ENOSPC) {
		t.Errorf("failures reported: %v; want one, ENOSPC", failures)
	}
	if l.lost != 3 {
		t.Errorf("%d lines counted lost; want 3", l.lost)
	}
	// Once the file can be written again (here: reopened, as after a
	// rotation, on a file of its own), the loss is said in it.
	os.Remove(path)
	l.mu.Lock()
	l.f.Close()
	l.f = nil
	l.mu.Unlock()
	l.Write([]byte("back\n"))
	if got, _ := os.ReadFile(path); !regexpMatch(`^time=\S+ level=WARN msg="log lines were lost: the log file could not be written" count=3\nback\n$`, string(got)) {
		t.Errorf("after the failures the log holds %q", got)
	}
	if len(failures) != 1 {
		t.Errorf("the recovery reported a failure: %v", failures)
	}
}

// count3 is a skill that reports its progress as the kernel parses it:
// step=N/3 lines, a [[progress]] rule with step and total.
const count3 = `[skill]
name = "count3"
description = "count to three, reporting progress"
command = ["/usr/bin/sh", "-c", "for i in 1 2 3; do echo step=$i/3; sleep 0.4; done"]

[fs]
read = ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"]
exec = ["/usr/bin"]

[[progress]]
pattern = '^step=(?P<step>\d+)/(?P<total>\d+)$'
`

// Progress prints through one renderer: kairo send piped prints plain
// lines ("progress 33% (1/3)"), on a terminal redraws one bar in place;
// kairo runs show prints the same words, never a Go map. The up terminal
// shows a message another client sent before the replies to it, and not a
// message typed at it (the control).
func TestProgressEverywhere(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, "skills", "count3")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "skill.toml"), []byte(count3), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUpPTY(t, home)

	// Typed at the up terminal: answered, not announced as another's.
	d.tty.Write([]byte("help\n"))
	d.waitFor("agent> I understand", 30*time.Second)

	r := kairo(t, home, "send", "run count3")
	if r.code != 0 {
		t.Fatalf("kairo send:\n%s", r)
	}
	// The kernel publishes at most ten reports a second, so a loaded
	// machine may merge the first two; the last is always there.
	if !strings.Contains(r.stdout, "\n· progress 100% (3/3)\n") || !regexpMatch(`\n· progress (33|66)% \([12]/3\)\n`, r.stdout) {
		t.Errorf("kairo send lacks the plain progress lines:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "map[") || strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("kairo send piped prints a Go map or escape sequences:\n%q", r.stdout)
	}

	// --json: every line an event, progress included.
	r = kairo(t, home, "send", "--json", "run count3")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev["type"] == nil {
			t.Errorf("kairo send --json printed a line that is not an event: %q (%v)", l, err)
		}
	}
	if r.code != 0 || !regexpMatch(`"type":"kairo.process.progress".*"values":\{[^}]*"step":"3"`, r.stdout) || !strings.Contains(r.stdout, `"type":"kairo.intent.started"`) {
		t.Errorf("kairo send --json:\n%s", r)
	}

	// The up terminal: the question, then its task's lines, the progress
	// redrawn in place.
	d.waitFor("100% (3/3)", 30*time.Second)
	out := d.out.String()
	asked := strings.Index(out, "(from another client) you> run count3")
	task := strings.Index(out, "] process.spawn")
	if asked < 0 || task < 0 || asked > task {
		t.Errorf("the up terminal should show the other client's message before its task (at %d and %d):\n%q", asked, task, out)
	}
	if strings.Contains(out, "(from another client) you> help") {
		t.Errorf("the message typed at the up terminal is shown as another's:\n%q", out)
	}
	if !strings.Contains(out, "\x1b[1A\r\x1b[K· [") || strings.Contains(out, "map[") {
		t.Errorf("the up terminal does not redraw the progress line in place:\n%q", out)
	}

	// kairo runs show: the same plain words.
	r = kairo(t, home, "runs")
	var id string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasSuffix(line, "run count3") {
			id = strings.Fields(line)[0]
		}
	}
	if id == "" {
		t.Fatalf("no run loop for run count3:\n%s", r)
	}
	r = kairo(t, home, "runs", "show", id)
	if !regexpMatch(`kairo\.process\.progress\s+p\d+ progress (33|66)% \([12]/3\)`, r.stdout) || !strings.Contains(r.stdout, "progress 100% (3/3)") || strings.Contains(r.stdout, "map[") {
		t.Errorf("kairo runs show:\n%s", r)
	}
	r = kairo(t, home, "runs", "show", "--json", id)
	if !regexpMatch(`"type":"kairo.process.progress".*"values":\{[^}]*"step":"3"`, r.stdout) {
		t.Errorf("kairo runs show --json lacks the progress events:\n%s", r)
	}

	// On a terminal: runs show gives a process's progress one row, its
	// last, with its rate; send redraws one bar.
	if s := ptyKairo(t, home, "runs", "show", id); strings.Count(s, "kairo.process.progress") != 1 || !regexpMatch(`p\d+ \[#{20}\] 100% \(3/3\) \d\.\d/s`, s) {
		t.Errorf("kairo runs show on a terminal should give the progress one row:\n%s", s)
	}
	if s := ptyKairo(t, home, "send", "run count3"); !strings.Contains(s, "\x1b[1A\r\x1b[K· [") || !strings.Contains(s, "100% (3/3)") || strings.Contains(s, "· progress ") {
		t.Errorf("kairo send on a terminal should redraw one bar:\n%q", s)
	}
	d.stop()
}

// ptyKairo runs kairo with a pseudo-terminal for stdin, stdout and stderr
// and returns what it showed.
func ptyKairo(t *testing.T, home string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kairoBin, args...)
	cmd.Env = childEnv(home)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var got strings.Builder
	buf := make([]byte, 4096)
	for { // until EIO: the command exited
		n, err := tty.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
	}
	cmd.Wait()
	return got.String()
}

// The terminal's warnings: one line each, within the terminal's width but
// the message whole; no info; a warning repeated each tick shows once a
// minute, then with how many were not shown. The control: a warning of
// other words shows at once.
func TestConsoleWarnings(t *testing.T) {
	var b strings.Builder
	c := newConsole(&b, 60)
	h := &consoleHandler{c: c, level: slog.LevelWarn}
	t0 := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	warn := func(at time.Time, msg string, args ...any) {
		r := slog.NewRecord(at, slog.LevelWarn, msg, 0)
		r.Add(args...)
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelWarn) {
		t.Error("the console shows warnings and errors only")
	}
	for i := 0; i < 5; i++ {
		warn(t0.Add(time.Duration(i)*100*time.Millisecond), "tick", "tick", 100+i, "err", "no policy")
	}
	warn(t0, "tick", "tick", 200, "err", "another failure")
	warn(t0.Add(61*time.Second), "tick", "tick", 300, "err", "no policy")
	warn(t0, "a message longer than the terminal is wide, which stays whole", "path", strings.Repeat("x", 100))
	want := "kairo: tick (tick=100, err=no policy)\n" +
		"kairo: tick (tick=200, err=another failure)\n" +
		"kairo: tick (tick=300, err=no policy) [4 more like it since, in the log]\n" +
		"kairo: a message longer than the terminal is wide, which stays whole\n"
	if b.String() != want {
		t.Errorf("the console shows\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	warn(t0, "short", "path", strings.Repeat("x", 100))
	if line := strings.TrimSuffix(b.String(), "\n"); len([]rune(line)) != 59 || !strings.HasPrefix(line, "kairo: short (path=xxx") || !strings.HasSuffix(line, "…") {
		t.Errorf("a long attribute should be cut to the width: %q", line)
	}
}
