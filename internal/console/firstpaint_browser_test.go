package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/console"
)

// TestConsoleFirstPaintDrawnByDaemon: index.html comes with the first
// read's rows drawn in, escaped, and they are the rows app.js draws from
// the same read (which replaces them with its own): the run loops, their
// processes' output with its colours, the events outside run loops, the
// chat. The page is the log's, so never kept by the browser.
func TestConsoleFirstPaintDrawnByDaemon(t *testing.T) {
	home := newHome(t)
	d := startDaemon(t, home)
	c := d.dial()
	ctx := t.Context()
	for _, ev := range []any{
		map[string]any{"text": `<script>alert(1)</script> & "quoted" </ol>`, "n": 1.5, "list": []any{1, "two", nil}, "10": "index first", "\x1b[31mkey": "\x1b[1mbold\x1b[0m\r"},
		"a string, not an object",
		[]any{},
	} {
		if _, err := c.Publish(ctx, eventOf("app.test.firstpaint", ev)); err != nil {
			t.Fatal(err)
		}
	}
	kairo(t, home, "send", `run printf '\033[31mred\033[0m plain <b>&amp;\n'`)
	kairo(t, home, "send", "run seq 1 30")
	kairo(t, home, "send", "help")
	b := newBrowser(t)
	b.open(d.url())
	for _, goal := range []string{`run printf '\033[31mred\033[0m plain <b>&amp;\n'`, "run seq 1 30"} {
		loop := loopWith(goal)
		b.wait("the run loop, done", loop+` && `+loop+`.classList.contains("s-done")`, time.Minute)
	}
	// A fresh page, after the log went quiet: the daemon's rows and the
	// script's, drawn from the same read.
	same := `window.same = undefined; (async () => {
		const norm = (root) => {
			for (const e of root.querySelectorAll("[style]")) e.removeAttribute("style");
			return root.innerHTML;
		};
		const page = new DOMParser().parseFromString(await (await fetch("/")).text(), "text/html");
		if (page.body.dataset.rendered !== "1") return "the page came without its rows";
		for (const id of ["loops", "others", "messages"]) {
			const a = norm(page.getElementById(id)), b = norm(document.getElementById(id).cloneNode(true));
			if (a !== b) {
				let i = 0;
				while (i < a.length && a[i] === b[i]) i++;
				return id + " differs at " + i + ":\ndaemon: " + a.slice(Math.max(0, i - 200), i + 200) + "\nscript: " + b.slice(Math.max(0, i - 200), i + 200);
			}
		}
		if (page.querySelectorAll("#others script, #loops script").length) return "markup of an event's data was not escaped";
		return "";
	})().then((v) => (window.same = v), (e) => (window.same = String(e)))`
	var diff string
	for range 5 {
		b.open(d.url())
		b.wait("the page held", `document.body.dataset.held === "1" && document.body.dataset.rendered === "1"`, time.Minute)
		eval[any](b, same)
		b.wait("the two drawings compared", `window.same !== undefined`, 30*time.Second)
		if diff = eval[string](b, `window.same`); diff == "" {
			break
		}
		time.Sleep(time.Second) // an event came between the two reads
	}
	if diff != "" {
		t.Error(diff)
	}
	if a := eval[string](b, `document.body.dataset.adopted || ""`); a != "1" {
		t.Errorf("the script did not take the daemon's rows over (adopted %q): it drew its own", a)
	}
	if n := eval[int](b, `document.querySelectorAll("#loops .out .a-fg1").length`); n == 0 {
		t.Error("no red in the printf's output")
	}
	if !eval[bool](b, `document.getElementById("others").textContent.includes("<script>alert(1)</script>")`) {
		t.Error("the event's text is not shown as text")
	}
	b.clean()

	u := d.url()
	res, err := http.Get(strings.SplitN(u, "?", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the page without the token: %d, want 401", res.StatusCode)
	}
	req, _ := http.NewRequest("GET", strings.SplitN(u, "?", 2)[0], nil)
	req.Header.Set("Cookie", console.CookieName+"="+strings.SplitN(u, "token=", 2)[1])
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if cc := res.Header.Get("Cache-Control"); res.StatusCode != http.StatusOK || cc != "no-store" || res.Header.Get("ETag") != "" {
		t.Errorf("the page with the token: %d, Cache-Control %q, ETag %q; want 200, no-store and none", res.StatusCode, cc, res.Header.Get("ETag"))
	}
}
