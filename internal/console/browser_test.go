package console_test

// The console in a real browser: headless Chromium, driven by chromedp,
// against a real `kairo up` built by TestMain. Nothing is faked: the page
// reads the daemon's log, follows its stream and acts through its API.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/sdk/client"
)

// kairoBin is the kairo binary the tests run, built once by TestMain.
var kairoBin string

func TestMain(m *testing.M) { testkit.Main(m, &kairoBin) }

// chromiumPath is the browser the tests drive: Debian's chromium, else one
// on PATH. Without one the tests fail, saying how to install it: a browser
// test that skips proves nothing.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("the console's tests need Chromium: apt-get install chromium (make testdata checks for it)")
	return ""
}

// artifacts is the folder the tests leave screenshots in for a reviewer:
// $KAIRO_TEST_ARTIFACTS, else kairo-console-artifacts under the temp dir.
func artifacts(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KAIRO_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kairo-console-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// childEnv is the environment of a kairo child on home.
func childEnv(home string) []string { return testkit.ChildEnv(home) }

// newHome is a data folder whose kairo.toml turns the console on, on a
// free loopback port.
func newHome(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	home := t.TempDir()
	cfg := fmt.Sprintf("[console]\nlisten = %q\n", addr)
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// daemon is a `kairo up` child process.
type daemon struct {
	t      testing.TB
	home   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	err    error
}

type syncBuffer = testkit.SyncBuffer

// startDaemon starts `kairo up` on home and returns once it is ready
// (client.WaitReady). The test's cleanup kills it if it still runs.
func startDaemon(t testing.TB, home string) *daemon {
	t.Helper()
	d := &daemon{t: t, home: home, stderr: &syncBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(kairoBin, "up", "--home", home)
	d.cmd.Env = childEnv(home)
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		select {
		case <-d.exited:
			t.Fatalf("kairo up exited before it was ready: %v\n%s", d.err, d.stderr)
		default:
		}
		var c *client.Client
		if c, err = client.Dial(ctx, filepath.Join(home, "kernel.sock")); err == nil {
			err = c.WaitReady(ctx)
			c.Close()
			if err == nil {
				return d
			}
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	t.Fatalf("kairo up not ready: %v\n%s", err, d.stderr)
	return nil
}

// stop ends the daemon with SIGTERM and waits for it.
func (d *daemon) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		d.t.Fatalf("kairo up did not stop within 30s\n%s", d.stderr)
	}
}

// dial connects the test to the daemon; the test's cleanup closes it.
func (d *daemon) dial() *client.Client {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, filepath.Join(d.home, "kernel.sock"))
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// url is the console's address with its token, from $KAIRO_HOME/console.token
// (the URL itself, or the token alone beside kairo.toml's listen address).
func (d *daemon) url() string {
	d.t.Helper()
	var b []byte
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err = os.ReadFile(filepath.Join(d.home, "console.token")); err == nil && len(bytes.TrimSpace(b)) > 0 {
			break
		}
	}
	if err != nil {
		d.t.Fatalf("the console's token: %v\n%s", err, d.stderr)
	}
	tok := strings.TrimSpace(string(b))
	if strings.HasPrefix(tok, "http://") {
		return tok
	}
	cfg, err := os.ReadFile(filepath.Join(d.home, "kairo.toml"))
	if err != nil {
		d.t.Fatal(err)
	}
	var addr string
	sc := bufio.NewScanner(bytes.NewReader(cfg))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "listen = "); ok {
			addr = strings.Trim(v, `"`)
		}
	}
	return "http://" + addr + "/?token=" + tok
}

// kairo runs the binary against home's daemon and returns its output.
func kairo(t testing.TB, home string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kairoBin, args...)
	cmd.Env = childEnv(home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kairo %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// browser is one headless Chromium tab, with what the page reported:
// console messages, exceptions, the browser's log (a CSP violation is an
// entry of it) and the dialogs it opened.
type browser struct {
	t      testing.TB
	ctx    context.Context
	mu     sync.Mutex
	logs   []string
	bad    []string // errors, exceptions, CSP violations
	dialog []string
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-gpu", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	var wg sync.WaitGroup
	// Both readers end when ctx is canceled; the cleanup waits for them.
	messages := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			s := fmt.Sprintf("%s %s: %s %s", m.Type, m.Source, m.Text, m.URL)
			b.mu.Lock()
			b.logs = append(b.logs, s)
			// The browser asks for /favicon.ico on its own, and the page has
			// none; while a daemon restarts, the stream's reconnects are refused.
			expected := m.Source == "network" && (strings.HasSuffix(m.URL, "/favicon.ico") ||
				strings.Contains(m.URL, "/api/stream?") && strings.Contains(m.Text, "ERR_CONNECTION_REFUSED"))
			if !expected && m.Type == chromedp.ConsoleError || m.IsException() || m.Source == "security" ||
				strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "CSP") {
				b.bad = append(b.bad, s)
			}
			b.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialog = append(b.dialog, ev.Message)
			b.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	t.Cleanup(func() {
		cancel()
		acancel()
		wg.Wait()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v\n%s", err, b.report())
	}
}

// eval evaluates expr in the page and decodes its value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v\n%s", expr, err, b.report())
	}
	return v
}

// wait polls expr, a JavaScript expression, until it is true.
func (b *browser) wait(what, expr string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.screenshot("timeout-" + strings.ReplaceAll(what, " ", "-"))
			b.t.Fatalf("the page did not show %s within %v (%s): %v\n%s", what, within, expr, err, b.report())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// open loads the console at url and waits for its first paint.
func (b *browser) open(url string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url))
	b.wait("its first paint", `document.body && document.body.dataset.ready === "1"`, time.Minute)
}

// screenshot saves the whole page as NAME.png in the artifacts folder.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	name = strings.NewReplacer("/", "-", " ", "-").Replace(b.t.Name() + "-" + name)
	path := filepath.Join(artifacts(b.t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

func (b *browser) report() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return "page console:\n  " + strings.Join(b.logs, "\n  ")
}

// clean fails the test if the page ran into an error, a CSP violation or
// a dialog.
func (b *browser) clean() {
	b.t.Helper()
	b.mu.Lock()
	bad, dialogs := append([]string(nil), b.bad...), append([]string(nil), b.dialog...)
	b.mu.Unlock()
	if len(bad) > 0 {
		b.t.Errorf("the page reported errors:\n  %s", strings.Join(bad, "\n  "))
	}
	if len(dialogs) > 0 {
		b.t.Errorf("the page opened dialogs: %q", dialogs)
	}
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x2028 || r == 0x2029 || r == '<' || r == '>':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// loopWith is a JavaScript expression: the run loop element whose goal is goal.
func loopWith(goal string) string {
	return `[...document.querySelectorAll(".loop")].find(l => l.querySelector(".goal").textContent === ` + js(goal) + `)`
}

// loops lists the run loops the page shows: id → status.
func loops(b *browser) map[string]string {
	b.t.Helper()
	return eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll(".loop")].map(l => [l.dataset.loop, l.querySelector(".status").textContent]))`)
}

// TestConsoleRunLoop: a run loop started from the page's chat box shows in
// the timeline with its process's output live, ANSI colours rendered; the
// page's cancel button ends the process (checked by its pid); one started
// with `kairo send` shows too; after a daemon restart a reload shows the
// same run loops. The page carries its CSP and runs under it clean.
func TestConsoleRunLoop(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	d := startDaemon(t, home)
	url := d.url()
	checkCSP(t, url)

	b := newBrowser(t)
	b.open(url)

	// From the chat box: a process that prints coloured lines for a minute.
	const goal = `run for i in $(seq 1 600); do printf '\033[32mtick %d\033[0m\n' $i; sleep 0.1; done`
	b.do(
		chromedp.SetValue(chromedp.ID("text"), goal),
		chromedp.Click(chromedp.CSS(`#send button`)),
	)
	loop := loopWith("run for i in $(seq 1 600); do printf '\\033[32mtick %d\\033[0m\\n' $i; sleep 0.1; done")
	b.wait("the run loop", loop, time.Minute)
	b.wait("the user's message in the chat", `[...document.querySelectorAll("#messages .user")].some(m => m.textContent.includes("seq 1 600"))`, 10*time.Second)
	proc := loop + `.querySelector(".proc")`
	b.wait("the process", proc, time.Minute)
	b.wait("its live output, coloured", proc+`.querySelector(".out .a-fg2") && /tick [3-9]/.test(`+proc+`.querySelector(".out").textContent)`, time.Minute)
	if txt := eval[string](b, proc+`.querySelector(".out").textContent`); strings.Contains(txt, "\x1b") || strings.Contains(txt, "[32m") {
		t.Errorf("the output shows escape codes as text: %q", txt)
	}
	pid := eval[int](b, `Number(`+proc+`.dataset.pid)`)
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the page shows pid %d, which is not a live process", pid)
	}
	b.screenshot("running")

	b.do(chromedp.Click(chromedp.CSS(`.loop:has(.proc.running) button.cancel`)))
	b.wait("the run loop canceled", loop+`.classList.contains("s-canceled")`, time.Minute)
	b.wait("the process ended", `!`+proc+`.classList.contains("running")`, time.Minute)
	for deadline := time.Now().Add(15 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after the page canceled its run loop", pid)
		}
	}

	// From the command line.
	kairo(t, home, "send", "run echo hello from send")
	sent := loopWith("run echo hello from send")
	b.wait("the run loop of kairo send, done", sent+` && `+sent+`.classList.contains("s-done")`, time.Minute)
	b.wait("its reply in the chat", `document.querySelectorAll("#messages .agent").length > 0`, 10*time.Second)

	// The kill button of a process signals it.
	b.do(
		chromedp.SetValue(chromedp.ID("text"), "run sleep 300"),
		chromedp.Click(chromedp.CSS(`#send button`)),
	)
	sleeper := loopWith("run sleep 300") + `.querySelector(".proc.running")`
	b.wait("the process to kill", sleeper, time.Minute)
	spid := eval[int](b, `Number(`+sleeper+`.dataset.pid)`)
	if spid <= 0 || syscall.Kill(spid, 0) != nil {
		t.Fatalf("the page shows pid %d, which is not a live process", spid)
	}
	b.do(chromedp.Click(chromedp.CSS(`.proc.running button.kill`)))
	b.wait("the process killed", loopWith("run sleep 300")+`.querySelector(".proc .pstate").textContent.includes("SIGTERM")`, time.Minute)
	for deadline := time.Now().Add(15 * time.Second); syscall.Kill(spid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after the page killed it", spid)
		}
	}

	// The envelope of an event, and its cause.
	b.do(chromedp.Click(chromedp.CSS(`.loop .k-exited`)))
	b.wait("the envelope", `document.getElementById("envelope").textContent.includes('"type": "kairo.process.exited"')`, 10*time.Second)
	b.wait("its cause", `document.querySelector("#cause button, #cause span")`, 10*time.Second)
	b.wait("a tick's context window", `[...document.querySelectorAll(".loop .k-context summary")].some(s => /\d+ observed/.test(s.textContent))`, 10*time.Second)
	b.wait("the plugins", `document.querySelectorAll("#plugins li").length > 0`, 30*time.Second)
	b.wait("the tools", `document.querySelectorAll("#tools li").length > 0`, 30*time.Second)
	b.screenshot("done")

	before := loops(b)
	if len(before) < 2 {
		t.Fatalf("the page shows %d run loops, want 2: %v", len(before), before)
	}
	d.stop()
	d = startDaemon(t, home)
	// The open page follows the new daemon (same token, same cookie)...
	b.wait("the page following the new daemon", `document.querySelectorAll('[data-type="kairo.system.started"]').length >= 2`, time.Minute)
	// ...and a reload rebuilds the same run loops from the log.
	b.open(d.url())
	b.wait("the run loops again", fmt.Sprintf(`document.querySelectorAll(".loop").length >= %d`, len(before)), time.Minute)
	b.wait("the plugins again", `document.querySelectorAll("#plugins li").length > 0`, 30*time.Second)
	after := loops(b)
	for id, st := range before {
		if after[id] != st {
			t.Errorf("after a restart and a reload, run loop %s is %q, was %q", id, after[id], st)
		}
	}
	b.screenshot("after-restart")
	b.clean()
}

// checkCSP fetches the page as a browser would and checks its
// Content-Security-Policy: scripts and styles from the page's own origin,
// nothing inline, no eval.
func checkCSP(t *testing.T, url string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	csp := res.Header.Get("Content-Security-Policy")
	if res.StatusCode != http.StatusOK || csp == "" {
		t.Fatalf("GET %s: %s, Content-Security-Policy %q", url, res.Status, csp)
	}
	for _, want := range []string{"script-src 'self'", "style-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("the CSP %q lacks %q", csp, want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval"} {
		if strings.Contains(csp, bad) {
			t.Errorf("the CSP %q allows %s", csp, bad)
		}
	}
}

// TestConsoleHostileText: markup, script, javascript: links and terminal
// escapes in a user's message, a process's output and an event's data are
// shown as text: no element is made of them, no script runs, no dialog
// opens, no CSP violation is reported.
func TestConsoleHostileText(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	d := startDaemon(t, home)
	b := newBrowser(t)
	b.open(d.url())
	baseline := eval[int](b, `document.querySelectorAll("*").length`)
	if baseline == 0 {
		t.Fatal("the page is empty")
	}

	const hostile = `<img src=x onerror=alert(1)><script>alert(2)</script><a href="javascript:alert(3)">click</a>`
	// The line goes through sh: its printf writes the markup and a red word,
	// a title-setting OSC and a cursor move, all of which must stay text or
	// go.
	kairo(t, home, "send", `run printf '%s \033[31mred\033[0m\033]0;pwned\007\033[2J done\n' '`+hostile+`'`)
	c := d.dial()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Publish(ctx, eventOf("app.hostile", map[string]string{"text": hostile + "\x1b[31mred"})); err != nil {
		t.Fatal(err)
	}

	b.wait("the run loop", `document.querySelector(".loop.s-done")`, time.Minute)
	b.wait("the hostile event", `document.querySelector('[data-type="app.hostile"]')`, 30*time.Second)
	b.wait("the output, as text", `[...document.querySelectorAll(".out")].some(o => o.textContent.includes('<img src=x onerror=alert(1)>'))`, 30*time.Second)
	for _, q := range []string{"img", "script:not([src])", "a", "iframe", "object", "embed", "[onerror]", "[onclick]", `[href^="javascript"]`} {
		if n := eval[int](b, `document.querySelectorAll(`+js(q)+`).length`); n != 0 {
			t.Errorf("the page holds %d %s elements made of event text", n, q)
		}
	}
	if n := eval[int](b, `document.scripts.length`); n != 1 {
		t.Errorf("the page holds %d scripts, want its own one", n)
	}
	text := eval[string](b, `document.body.textContent`)
	for _, want := range []string{hostile, "red"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not show %q as text", want)
		}
	}
	if strings.Contains(text, "\x1b") {
		t.Error("the page shows an escape character")
	}
	out := eval[string](b, `[...document.querySelectorAll(".out")].map(o => o.textContent).join("\n")`)
	for _, bad := range []string{"]0;pwned", "[2J", "[31m", "[0m"} {
		if strings.Contains(out, bad) {
			t.Errorf("the output shows the escape %q: %q", bad, out)
		}
	}
	if eval[string](b, `document.title`) != "Kairo console" {
		t.Error("an OSC sequence in the output set the page's title")
	}
	b.wait("the red word", `[...document.querySelectorAll(".out .a-fg1")].some(s => s.textContent === "red")`, 10*time.Second)
	if pwned := eval[bool](b, `typeof window.pwned !== "undefined"`); pwned {
		t.Error("event text ran as script")
	}
	b.screenshot("hostile")
	b.clean()
}

// eventOf is an app event whose data is v as MsgPack.
func eventOf(typ string, v any) abi.Event {
	data, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return abi.Event{Type: typ, Data: data}
}
