package console_test

// The server against a real daemon (host.New, in process) on a real
// socket: each refusal beside its control, the API's answers, the stream.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/internal/console"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/client"
)

// logBuffer is a log the test reads while the daemon writes it.
type logBuffer struct{ syncBuffer }

// upConsole starts a daemon with the console on a free loopback port and
// returns it, its URL with the token, and its log.
func upConsole(t *testing.T, edit func(*manifests.Config)) (*host.Daemon, *url.URL, *logBuffer) {
	t.Helper()
	cfg := manifests.Default()
	cfg.Sandbox.Mode = manifests.SandboxOff // spawns need no sandbox helper here
	cfg.Console.Listen = "127.0.0.1:0"
	if edit != nil {
		edit(&cfg)
	}
	logs := &logBuffer{}
	d := host.New(host.Config{Home: t.TempDir(), Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err := d.Start(); err != nil {
		t.Fatalf("start: %v\n%s", err, logs)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	if cfg.Console.Listen == "" {
		return d, nil, logs
	}
	u, err := url.Parse(d.ConsoleURL())
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("ConsoleURL = %q: %v", d.ConsoleURL(), err)
	}
	return d, u, logs
}

// upConsoleClient is upConsole with a client of the daemon's socket and a
// context that ends after timeout, both ended with the test.
func upConsoleClient(t *testing.T, timeout time.Duration) (context.Context, *host.Daemon, *url.URL, *client.Client) {
	t.Helper()
	d, u, _ := upConsole(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	c, err := client.Dial(ctx, d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, d, u, c
}

func token(u *url.URL) string { return u.Query().Get("token") }

// getJSON is the console's answer to GET path with the token, which must
// be 200 with a T as JSON.
func getJSON[T any](t *testing.T, u *url.URL, path string) T {
	t.Helper()
	res, body := do(t, u, "GET", path, "", bearer(u))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, res.StatusCode, body)
	}
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%s: %v\n%.300s", path, err, body)
	}
	return v
}

// do sends a request to the console at u with the headers given, and
// returns the answer with its body read.
func do(t *testing.T, u *url.URL, method, path string, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+u.Host+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func bearer(u *url.URL) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token(u)}
}

func cookie(u *url.URL, more map[string]string) map[string]string {
	h := map[string]string{"Cookie": console.CookieName + "=" + token(u)}
	for k, v := range more {
		h[k] = v
	}
	return h
}

func TestServerTokenRequired(t *testing.T) {
	_, u, _ := upConsole(t, nil)
	for _, path := range []string{"/", "/app.js", "/api/status", "/api/events", "/api/plugins", "/api/tools"} {
		res, body := do(t, u, "GET", path, "", nil)
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s without a token: %d %s; want 401 with an error", path, res.StatusCode, body)
		}
		res, _ = do(t, u, "GET", path, "", map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 64)})
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d; want 401", path, res.StatusCode)
		}
		res, body = do(t, u, "GET", path, "", bearer(u))
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the Bearer token: %d %s; want 200", path, res.StatusCode, body)
		}
		res, _ = do(t, u, "GET", path, "", cookie(u, nil))
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the cookie: %d; want 200", path, res.StatusCode)
		}
	}
	// The status is kairo status --json's.
	_, body := do(t, u, "GET", "/api/status", "", bearer(u))
	var st struct {
		Version string   `json:"version"`
		Ready   bool     `json:"ready"`
		Methods []string `json:"methods"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || !st.Ready || len(st.Methods) == 0 {
		t.Errorf("/api/status = %s (%v)", body, err)
	}
	_, body = do(t, u, "GET", "/api/plugins", "", bearer(u))
	if !strings.Contains(body, `"plugins":[{"name":`) {
		t.Errorf("/api/plugins = %.300s", body)
	}
	_, body = do(t, u, "GET", "/api/tools", "", bearer(u))
	if !strings.Contains(body, `"tools":[{"name":`) {
		t.Errorf("/api/tools = %.300s", body)
	}
}

func TestServerHeaders(t *testing.T) {
	_, u, _ := upConsole(t, nil)
	for _, path := range []string{"/", "/api/status"} {
		for _, auth := range []map[string]string{nil, bearer(u)} {
			res, _ := do(t, u, "GET", path, "", auth)
			csp := res.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-") {
				t.Errorf("GET %s (%d): CSP %q", path, res.StatusCode, csp)
			}
			if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("GET %s: headers %v", path, res.Header)
			}
			if strings.HasPrefix(path, "/api/") && res.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("GET %s: Cache-Control %q", path, res.Header.Get("Cache-Control"))
			}
		}
	}
}

// The page names its script and stylesheet by pinned names, a hash of
// their content, which the browser keeps without asking again; the page
// itself, and the files under their own names, are revalidated.
func TestServerPinnedFiles(t *testing.T) {
	_, u, _ := upConsole(t, nil)
	res, page := do(t, u, "GET", "/", "", bearer(u))
	if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("ETag") == "" {
		t.Fatalf("GET /: %d, Cache-Control %q, ETag %q", res.StatusCode, res.Header.Get("Cache-Control"), res.Header.Get("ETag"))
	}
	res, _ = do(t, u, "GET", "/", "", cookie(u, map[string]string{"If-None-Match": res.Header.Get("ETag")}))
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("GET / again with its ETag: %d, want 304", res.StatusCode)
	}
	for _, f := range []struct{ name, ref, ctype string }{{"app.js", `<script src="`, "text/javascript"}, {"app.css", `<link rel="stylesheet" href="`, "text/css"}} {
		_, rest, ok := strings.Cut(page, f.ref)
		pin, _, _ := strings.Cut(rest, `"`)
		if !ok || pin == f.name || !strings.HasPrefix(pin, strings.TrimSuffix(f.name, path.Ext(f.name))+".") || !strings.HasSuffix(pin, path.Ext(f.name)) {
			t.Errorf("the page names %q for %s, want a pinned name", pin, f.name)
			continue
		}
		res, body := do(t, u, "GET", "/"+pin, "", cookie(u, nil))
		_, own := do(t, u, "GET", "/"+f.name, "", cookie(u, nil))
		if res.StatusCode != http.StatusOK || body != own || !strings.HasPrefix(res.Header.Get("Content-Type"), f.ctype) || res.Header.Get("Cache-Control") != "private, max-age=31536000, immutable" {
			t.Errorf("GET /%s: %d, Content-Type %q, Cache-Control %q, same as /%s: %v", pin, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"), f.name, body == own)
		}
		if res, _ := do(t, u, "GET", "/"+pin, "", nil); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /%s without the token: %d, want 401", pin, res.StatusCode)
		}
		if res, _ := do(t, u, "GET", "/"+strings.Replace(pin, ".", ".0", 1), "", bearer(u)); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET a pinned name of no file: %d, want 404", res.StatusCode)
		}
	}
	res, _ = do(t, u, "GET", "/index.html", "", bearer(u))
	if res.StatusCode != http.StatusMovedPermanently {
		t.Errorf("GET /index.html: %d, want a redirect to /", res.StatusCode)
	}
}

func TestServerHost(t *testing.T) {
	_, u, _ := upConsole(t, nil)
	_, port, _ := net.SplitHostPort(u.Host)
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1:1", "localhost.evil.example:" + port, "10.0.0.1:" + port} {
		res, body := do(t, u, "GET", "/api/status", "", map[string]string{"Host": host, "Authorization": "Bearer " + token(u)})
		if res.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, "Host") {
			t.Errorf("Host %s: %d %s; want 421", host, res.StatusCode, body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		res, body := do(t, u, "GET", "/api/status", "", map[string]string{"Host": host, "Authorization": "Bearer " + token(u)})
		if res.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d %s; want 200", host, res.StatusCode, body)
		}
	}
}

func TestServerLogin(t *testing.T) {
	_, u, _ := upConsole(t, nil)
	res, body := do(t, u, "GET", "/?token="+strings.Repeat("ab", 32), "", nil)
	if res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
		t.Errorf("a wrong ?token=: %d %v %s; want 401 and no cookie", res.StatusCode, res.Cookies(), body)
	}
	res, _ = do(t, u, "GET", "/?token="+token(u), "", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("?token=: %d, Location %q; want 303 to /", res.StatusCode, res.Header.Get("Location"))
	}
	set := res.Header.Get("Set-Cookie")
	for _, want := range []string{console.CookieName + "=" + token(u), "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	// The cookie opens the page.
	res, body = do(t, u, "GET", "/", "", map[string]string{"Cookie": strings.Split(set, ";")[0]})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "<") {
		t.Errorf("the page with the cookie: %d %.200s", res.StatusCode, body)
	}
}

func TestServerOriginAndSend(t *testing.T) {
	d, u, _ := upConsole(t, nil)
	own := "http://" + u.Host
	msg := `{"text": "hello from the console"}`
	refused := []map[string]string{
		cookie(u, map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}),
		cookie(u, map[string]string{"Origin": "null", "Content-Type": "application/json"}),
		cookie(u, map[string]string{"Content-Type": "application/json"}), // no Origin, no Bearer
		cookie(u, map[string]string{"Origin": own, "Content-Type": "text/plain"}),
		cookie(u, map[string]string{"Origin": own, "Content-Type": "application/x-www-form-urlencoded"}),
		{"Authorization": "Bearer " + token(u), "Origin": "http://evil.example", "Content-Type": "application/json"},
	}
	for _, h := range refused {
		res, body := do(t, u, "POST", "/api/send", msg, h)
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("POST with %v: %d %s; want 403", h, res.StatusCode, body)
		}
	}
	last := d.Kernel().Bus.LastSeq()
	for _, h := range []map[string]string{
		cookie(u, map[string]string{"Origin": own, "Content-Type": "application/json"}),
		{"Authorization": "Bearer " + token(u), "Content-Type": "application/json; charset=utf-8"},
	} {
		res, body := do(t, u, "POST", "/api/send", msg, h)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST with %v: %d %s; want 200", h, res.StatusCode, body)
		}
		var r struct {
			ID  string `json:"id"`
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.ID == "" || r.Seq <= last {
			t.Fatalf("send answered %s (%v)", body, err)
		}
		// The message is in the log, as kairo send publishes it.
		evs := replay(t, d, r.Seq)
		if len(evs) != 1 || evs[0].Type != abi.SubjectUserMessage || evs[0].ID != r.ID || evs[0].Source != fmt.Sprintf("operator/%d", os.Getuid()) {
			t.Fatalf("seq %d = %+v", r.Seq, evs)
		}
		var um abi.UserMessage
		if err := msgpack.Unmarshal(evs[0].Data, &um); err != nil || um.Text != "hello from the console" || um.MessageID == "" {
			t.Fatalf("the message = %+v, %v", um, err)
		}
	}
	res, body := do(t, u, "POST", "/api/send", `{"text": "   "}`, bearer(u))
	if res.StatusCode != http.StatusForbidden { // no Content-Type
		t.Errorf("no Content-Type: %d %s", res.StatusCode, body)
	}
	h := bearer(u)
	h["Content-Type"] = "application/json"
	if res, body := do(t, u, "POST", "/api/send", `{"text": "   "}`, h); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "empty") {
		t.Errorf("an empty message: %d %s", res.StatusCode, body)
	}
	big := `{"text": "` + strings.Repeat("x", 70<<10) + `"}`
	if res, body := do(t, u, "POST", "/api/send", big, h); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 70 KiB body: %d %.200s", res.StatusCode, body)
	}
	if res, body := do(t, u, "POST", "/api/cancel", `{"runLoopId": ""}`, h); res.StatusCode != http.StatusBadRequest {
		t.Errorf("cancel without a run loop: %d %s", res.StatusCode, body)
	}
	if res, body := do(t, u, "POST", "/api/kill", `{"processId": "p999"}`, h); res.StatusCode != http.StatusNotFound {
		t.Errorf("kill of no process: %d %s", res.StatusCode, body)
	}
}

// replay is the stored event seq.
func replay(t *testing.T, d *host.Daemon, seq uint64) []abi.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var evs []abi.Event
	_, err = c.Replay(ctx, abi.ReplayParams{FromSeq: seq, ToSeq: seq}, func(ev *abi.Event) error {
		evs = append(evs, *ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestServerEvents(t *testing.T) {
	ctx, d, u, c := upConsoleClient(t, time.Minute)
	for i := range 30 {
		data, _ := msgpack.Marshal(map[string]any{"n": i, "html": "<img src=x onerror=alert(1)>"})
		if _, err := c.Publish(ctx, abi.Event{Type: "app.test.n", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		Events []struct {
			Seq    uint64          `json:"seq"`
			ID     string          `json:"id"`
			Type   string          `json:"type"`
			Source string          `json:"source"`
			Data   json.RawMessage `json:"data"`
		} `json:"events"`
		LastSeq uint64 `json:"lastSeq"`
	}
	get := func(q string) page { return getJSON[page](t, u, "/api/events"+q) }
	p := get("?limit=10")
	last := d.Kernel().Bus.LastSeq()
	if len(p.Events) != 10 || p.LastSeq < last-1 || p.Events[0].Seq != p.LastSeq {
		t.Fatalf("limit=10: %d events, lastSeq %d (log %d), first %d", len(p.Events), p.LastSeq, last, p.Events[0].Seq)
	}
	for i := 1; i < len(p.Events); i++ {
		if p.Events[i].Seq != p.Events[i-1].Seq-1 {
			t.Fatalf("not newest first: %d after %d", p.Events[i].Seq, p.Events[i-1].Seq)
		}
	}
	var n struct {
		N    int    `json:"n"`
		HTML string `json:"html"`
	}
	if err := json.Unmarshal(p.Events[0].Data, &n); err != nil || n.N != 29 || n.HTML != "<img src=x onerror=alert(1)>" {
		t.Errorf("the newest event's data = %s (%v)", p.Events[0].Data, err)
	}
	before := p.Events[9].Seq
	older := get("?limit=5&before=" + strconv.FormatUint(before, 10))
	if len(older.Events) != 5 || older.Events[0].Seq != before-1 {
		t.Errorf("before=%d: %+v", before, older.Events)
	}
	if all := get(""); len(all.Events) != int(all.LastSeq) || all.Events[len(all.Events)-1].Seq != 1 {
		t.Errorf("the default: %d events, lastSeq %d", len(all.Events), all.LastSeq)
	}
	for _, q := range []string{"?limit=0", "?limit=10001", "?limit=x", "?before=x", "?before=0"} {
		if res, body := do(t, u, "GET", "/api/events"+q, "", bearer(u)); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s; want 400", q, res.StatusCode, body)
		}
	}
}

// TestServerEventsFirstReadKept: the page's first read is answered again
// from the last answer while the log has not grown, and an event appended
// is in the next one.
func TestServerEventsFirstReadKept(t *testing.T) {
	ctx, _, u, c := upConsoleClient(t, time.Minute)
	for i := range 50 {
		ev := abi.Event{Type: "app.test.kept"}
		if i%10 == 0 {
			ev.CorrelationID = "r-" + strconv.Itoa(i)
		}
		if _, err := c.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	const q = "/api/events?limit=10000&outside=5"
	_, first := do(t, u, "GET", q, "", bearer(u))
	_, again := do(t, u, "GET", q, "", bearer(u))
	if first != again || !strings.Contains(first, `"omitted":40`) {
		t.Fatalf("the same read twice:\n%.300s\n%.300s", first, again)
	}
	res, err := c.Publish(ctx, abi.Event{Type: "app.test.new"})
	if err != nil {
		t.Fatal(err)
	}
	_, after := do(t, u, "GET", q, "", bearer(u))
	if !strings.Contains(after, `"type":"app.test.new"`) || !strings.Contains(after, fmt.Sprintf(`"lastSeq":%d`, res.Seq)) || !strings.Contains(after, `"omitted":41`) {
		t.Fatalf("the read after an event appended: %.300s", after)
	}
}

// TestServerEventsOutside: with outside=K, a read answers every event of
// its window that a run loop may hold (kairo.> or a correlationId) and
// only the newest K of the others, counting those it left out; what it
// answers is the whole read less those. The reads of windows the console
// read before (its run index) and of new ones answer alike.
func TestServerEventsOutside(t *testing.T) {
	t.Parallel()
	ctx, _, u, c := upConsoleClient(t, time.Minute)
	n := 0
	publish := func(count int) {
		for range count {
			data, _ := msgpack.Marshal(map[string]any{"n": n})
			ev := abi.Event{Type: "app.test.n", Data: data}
			if n%4 == 0 && n < 40 || n%97 == 0 || n > 300 && n%150 < 3 {
				ev.CorrelationID = "r-" + strconv.Itoa(n) // a run loop's, whatever its subject
			}
			n++
			if _, err := c.Publish(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	type event struct {
		Seq           uint64 `json:"seq"`
		Type          string `json:"type"`
		CorrelationID string `json:"correlationId"`
		Data          any    `json:"data"`
	}
	type page struct {
		Events  []event `json:"events"`
		LastSeq uint64  `json:"lastSeq"`
		Omitted int     `json:"omitted"`
	}
	get := func(q string) page { return getJSON[page](t, u, "/api/events"+q) }
	outside := func(e event) bool { return e.CorrelationID == "" && !strings.HasPrefix(e.Type, "kairo.") }
	check := func(limit int, before string, k int) {
		t.Helper()
		q := "?limit=" + strconv.Itoa(limit)
		if before != "" {
			q += "&before=" + before
		}
		whole := get(q)
		p := get(q + "&outside=" + strconv.Itoa(k))
		var want []event
		left := 0
		for _, e := range whole.Events {
			if !outside(e) {
				want = append(want, e)
			} else if left < k {
				want = append(want, e)
				left++
			}
		}
		omitted := 0
		for _, e := range whole.Events {
			if outside(e) {
				omitted++
			}
		}
		omitted -= left
		if len(p.Events) != len(want) || p.Omitted != omitted {
			t.Fatalf("%s outside=%d: %d events, %d omitted; want %d and %d", q, k, len(p.Events), p.Omitted, len(want), omitted)
		}
		for i := range want {
			if fmt.Sprint(p.Events[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("%s outside=%d: event %d is %+v, want %+v", q, k, i, p.Events[i], want[i])
			}
		}
	}
	publish(40)
	whole := get("?limit=35")
	for _, k := range []int{0, 5, 29, 35} {
		check(35, strconv.FormatUint(whole.LastSeq+1, 10), k)
	}
	// Run loops sparse among many others: windows the index covers, in
	// part, and not; new events after.
	publish(600)
	for range 2 {
		last := get("?limit=1").LastSeq
		for _, w := range []struct {
			limit  int
			before uint64
		}{{500, 0}, {500, last + 1}, {100, last - 200}, {300, last - 50}, {1000, 0}, {20, 30}} {
			before := ""
			if w.before > 0 {
				before = strconv.FormatUint(w.before, 10)
			}
			for _, k := range []int{0, 1, 7, 70, 300} {
				check(w.limit, before, k)
			}
		}
		publish(130)
	}
	if p := get("?limit=35"); p.Omitted != 0 {
		t.Errorf("without outside: %d omitted", p.Omitted)
	}
	for _, q := range []string{"?outside=-1", "?outside=x", "?outside=10001"} {
		if res, body := do(t, u, "GET", "/api/events"+q, "", bearer(u)); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "outside") {
			t.Errorf("%s: %d %s; want 400", q, res.StatusCode, body)
		}
	}
}

// sse reads Server-Sent Events from a response body.
type sse struct {
	r *bufio.Reader
}

type sseEvent struct{ event, id, data string }

func (s *sse) next() (sseEvent, error) {
	var e sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return e, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if e.event != "" || e.data != "" {
				return e, nil
			}
		case strings.HasPrefix(line, "event: "):
			e.event = line[7:]
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			e.data = line[6:]
		}
	}
}

func openStream(t *testing.T, ctx context.Context, u *url.URL, query string, headers map[string]string) (*http.Response, *sse) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+u.Host+"/api/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token(u))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res, &sse{r: bufio.NewReader(res.Body)}
}

func TestServerStream(t *testing.T) {
	ctx, _, u, c := upConsoleClient(t, 2*time.Minute)
	res0, err := c.Publish(ctx, abi.Event{Type: "app.before.stream"})
	if err != nil {
		t.Fatal(err)
	}
	// From a seq: the stored events after it first, then live ones.
	res, s := openStream(t, ctx, u, "?from="+strconv.FormatUint(res0.Seq-1, 10), nil)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %v", res.StatusCode, res.Header)
	}
	e, err := s.next()
	if err != nil || e.event != "kairo" || e.id != strconv.FormatUint(res0.Seq, 10) || !strings.Contains(e.data, `"type":"app.before.stream"`) {
		t.Fatalf("the first event = %+v, %v", e, err)
	}
	live, err := c.Publish(ctx, abi.Event{Type: "app.live"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		e, err = s.next()
		if err != nil {
			t.Fatal(err)
		}
		if e.event == "kairo" && e.id == strconv.FormatUint(live.Seq, 10) {
			break
		}
	}
	// Last-Event-ID wins over from: a reconnecting browser resumes.
	_, s2 := openStream(t, ctx, u, "?from=0", map[string]string{"Last-Event-ID": strconv.FormatUint(live.Seq-1, 10)})
	if e, err := s2.next(); err != nil || e.id != strconv.FormatUint(live.Seq, 10) {
		t.Fatalf("after Last-Event-ID %d: %+v, %v", live.Seq-1, e, err)
	}

	// A process's output, live, as chunk events; then /api/kill ends it.
	var info abi.ProcessInfo
	script := `i=0; while true; do i=$((i+1)); echo "line $i <b>x</b>"; sleep 0.1; done`
	if err := c.Call(ctx, abi.MethodProcessSpawn, abi.SpawnParams{Argv: []string{"/bin/sh", "-c", script}}, &info); err != nil {
		t.Fatal(err)
	}
	var chunk struct {
		ProcessID string `json:"processId"`
		Stream    string `json:"stream"`
		Data      string `json:"data"`
	}
	for chunk.ProcessID != info.ID {
		e, err := s.next()
		if err != nil {
			t.Fatalf("waiting for %s's output: %v", info.ID, err)
		}
		if e.event == "chunk" {
			if err := json.Unmarshal([]byte(e.data), &chunk); err != nil {
				t.Fatal(err)
			}
		}
	}
	if chunk.Stream != "stdout" || !strings.Contains(chunk.Data, "line") || !strings.Contains(chunk.Data, "<b>x</b>") {
		t.Errorf("chunk = %+v", chunk)
	}
	h := bearer(u)
	h["Content-Type"] = "application/json"
	kres, body := do(t, u, "POST", "/api/kill", `{"processId": "`+info.ID+`", "signal": "TERM"}`, h)
	if kres.StatusCode != http.StatusOK || !strings.Contains(body, `"processId":"`+info.ID+`"`) {
		t.Fatalf("kill: %d %s", kres.StatusCode, body)
	}
	var w abi.WaitResult
	if err := c.Call(ctx, abi.MethodProcessWait, abi.WaitParams{ProcessID: info.ID, Timeout: 20 * time.Second}, &w); err != nil || w.Process.Status == abi.ProcessRunning {
		t.Fatalf("after /api/kill: %+v, %v", w, err)
	}
	if w.Process.Signal != "SIGTERM" {
		t.Errorf("the process ended by %q, want SIGTERM", w.Process.Signal)
	}
	if kres, body := do(t, u, "POST", "/api/kill", `{"processId": "`+info.ID+`"}`, h); kres.StatusCode != http.StatusConflict {
		t.Errorf("kill of an ended process: %d %s", kres.StatusCode, body)
	}

	// /api/cancel ends a run loop's processes, as intent.cancel.
	if err := c.Call(ctx, abi.MethodProcessSpawn, abi.SpawnParams{Argv: []string{"/bin/sleep", "60"}, CorrelationID: "loop-1"}, &info); err != nil {
		t.Fatal(err)
	}
	cres, body := do(t, u, "POST", "/api/cancel", `{"runLoopId": "loop-1"}`, h)
	if cres.StatusCode != http.StatusOK || !strings.Contains(body, `"processIds":["`+info.ID+`"]`) {
		t.Fatalf("cancel: %d %s", cres.StatusCode, body)
	}
	for {
		e, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if e.event == "kairo" && strings.Contains(e.data, `"type":"kairo.intent.cancel"`) {
			if !strings.Contains(e.data, "operator console") {
				t.Errorf("the cancel does not name the console: %s", e.data)
			}
			break
		}
	}
}

func TestServerStreamBounds(t *testing.T) {
	_, u, _ := upConsole(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range console.DefaultMaxStreams {
		if res, _ := openStream(t, ctx, u, "", nil); res.StatusCode != http.StatusOK {
			t.Fatalf("a stream within the bound: %d", res.StatusCode)
		}
	}
	res, body := do(t, u, "GET", "/api/stream", "", bearer(u))
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) {
		t.Fatalf("stream %d: %d %s; want 503", console.DefaultMaxStreams+1, res.StatusCode, body)
	}
}

// A client that stops reading is dropped once its bounded queue is full:
// it gets "event: dropped" when it reads again, the log says so, and the
// server holds no more than the bound for it meanwhile.
func TestServerSlowClient(t *testing.T) {
	t.Parallel()
	d, _, _ := upConsole(t, func(c *manifests.Config) { c.Console.Listen = "" })
	logs := &logBuffer{}
	s, err := console.New(console.Config{
		Listen: "127.0.0.1:0", Home: t.TempDir(), Kernel: d.Kernel(),
		Logger: slog.New(slog.NewTextHandler(logs, nil)), StreamBuffer: 256 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	u, _ := url.Parse(s.URL())

	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", u.Host, token(u))
	head := make([]byte, 200)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(head)
	if err != nil || !bytes.HasPrefix(head[:n], []byte("HTTP/1.1 200")) {
		t.Fatalf("the stream's answer: %q, %v", head[:n], err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data, _ := msgpack.Marshal(map[string]string{"pad": strings.Repeat("x", 32<<10)})
	for i := 0; !strings.Contains(logs.String(), "dropped a stream client"); i++ {
		if i == 4000 {
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			got, err := io.ReadAll(conn)
			t.Fatalf("128 MiB of events published, and the client that reads nothing was not dropped (it holds %d bytes, %v: ...%q)\n%s", len(got), err, got[max(0, len(got)-300):], logs)
		}
		if _, err := d.Kernel().Bus.Publish(ctx, &abi.Event{Type: "app.pad", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	all, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("reading the dropped stream: %v (%d bytes: ...%q)", err, len(all), all[max(0, len(all)-200):])
	}
	if !bytes.Contains(all, []byte("\nevent: dropped\n")) {
		t.Fatalf("the stream ends without event: dropped: ...%q", all[max(0, len(all)-300):])
	}
}

func TestServerRemoteListen(t *testing.T) {
	cfg := manifests.Default()
	cfg.Console.Listen = "0.0.0.0:0"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "allow_remote = true") {
		t.Fatalf("0.0.0.0 without allow_remote: %v", err)
	}
	cfg.Console.AllowRemote = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("0.0.0.0 with allow_remote: %v", err)
	}
	if _, err := console.New(console.Config{Listen: "0.0.0.0:0", Home: t.TempDir(), Kernel: nil}); err == nil {
		t.Fatal("New without a kernel")
	}
	d, u, logs := upConsole(t, func(c *manifests.Config) { c.Console.Listen, c.Console.AllowRemote = "0.0.0.0:0", true })
	_ = d
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "other machines") {
		t.Errorf("no warning for a remote listen:\n%s", logs)
	}
	_, port, _ := net.SplitHostPort(u.Host)
	if res, _ := do(t, u, "GET", "/api/status", "", bearer(u)); res.StatusCode != http.StatusOK {
		t.Errorf("by IP: %d", res.StatusCode)
	}
	if res, _ := do(t, u, "GET", "/api/status", "", map[string]string{"Host": "rebind.example:" + port, "Authorization": "Bearer " + token(u)}); res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a DNS name on a wildcard listen: %d, want 421", res.StatusCode)
	}
}

func TestServerStops(t *testing.T) {
	d, u, _ := upConsole(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, s := openStream(t, ctx, u, "", nil)
	done := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			_, err = s.next()
		}
		done <- err
	}()
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream open at Stop did not end")
	}
	if _, err := net.DialTimeout("tcp", u.Host, 2*time.Second); err == nil {
		t.Error("the console still listens after Stop")
	}
}

func TestConsoleURLMethod(t *testing.T) {
	ctx, _, u, c := upConsoleClient(t, time.Minute)
	var res abi.ConsoleURLResult
	if err := c.Call(ctx, abi.MethodConsoleURL, nil, &res); err != nil || res.URL != u.String() {
		t.Fatalf("console.url = %q, %v; want %q", res.URL, err, u)
	}
	off, _, _ := upConsoleOff(t)
	c2, err := client.Dial(ctx, off.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Call(ctx, abi.MethodConsoleURL, nil, &res); err == nil || !strings.Contains(err.Error(), `[console] listen = "127.0.0.1:8765"`) {
		t.Fatalf("console.url of a daemon without a console: %v", err)
	}
	if off.ConsoleURL() != "" {
		t.Errorf("ConsoleURL of a daemon without a console = %q", off.ConsoleURL())
	}
}

func upConsoleOff(t *testing.T) (*host.Daemon, string, error) {
	cfg := manifests.Default()
	cfg.Sandbox.Mode = manifests.SandboxOff
	home := t.TempDir()
	d := host.New(host.Config{Home: home, Config: cfg})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	if _, err := os.Stat(filepath.Join(home, console.TokenFile)); err == nil {
		t.Error("a daemon without a console made a token")
	}
	return d, home, nil
}
