package console_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kairo-os/kairo/sdk/client"
)

// fill publishes app events until the log holds n events, from a few
// publishers at once.
func fill(b *testing.B, c *client.Client, n uint64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := c.Publish(ctx, eventOf("app.bench.fill", map[string]int{"i": 0}))
	if err != nil {
		b.Fatal(err)
	}
	if res.Seq >= n {
		return
	}
	todo := int(n - res.Seq)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < todo; i += 8 {
				if _, err := c.Publish(ctx, eventOf("app.bench.fill", map[string]any{"i": i, "text": strings.Repeat("x", 40)})); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkConsoleFirstPaint: a log of 10,000 events (three run loops
// among app events); from the page's request to its timeline drawn, as
// the page measures it (performance.now() after the frame that drew the
// first paint; its origin is the navigation's start). Target: < 500 ms.
func BenchmarkConsoleFirstPaint(b *testing.B) {
	home := newHome(b)
	d := startDaemon(b, home)
	for _, cmd := range []string{"run echo one", "run seq 1 50", "run true"} {
		kairo(b, home, "send", cmd)
	}
	fill(b, d.dial(), 10000)
	br := newBrowser(b)
	url := d.url()
	br.open(url) // the cookie
	page := strings.SplitN(url, "?", 2)[0]

	var inPage, wall float64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		br.do(chromedp.Navigate(page))
		br.wait("its first paint", `document.body.dataset.painted && document.querySelectorAll(".loop").length >= 3`, time.Minute)
		wall += float64(time.Since(start).Microseconds()) / 1000
		inPage += eval[float64](br, `Number(document.body.dataset.painted)`)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(inPage/n, "ms")
	b.ReportMetric(wall/n, "wall-ms")
	events := eval[int](br, `Number(document.body.dataset.events)`)
	// Where the last one's time went: the server's answer, then the page.
	split := eval[[]float64](br, `(() => {
		const e = performance.getEntriesByType("resource").find(e => e.name.includes("/api/events"));
		const m = (n) => (performance.getEntriesByName(n)[0] || {}).startTime;
		return e ? [e.requestStart, e.responseStart, e.responseEnd, m("kairo:read"), m("kairo:folded"), Number(document.body.dataset.painted)] : [];
	})()`)
	b.Logf("first paint of a 10,000-event log (%d events read): %.1f ms in the page, %.1f ms with the driver's polling; the last: /api/events asked at %.0f ms, answered %.0f-%.0f ms, parsed at %.0f ms, folded into the DOM at %.0f ms, drawn at %.0f ms",
		events, inPage/n, wall/n, at(split, 0), at(split, 1), at(split, 2), at(split, 3), at(split, 4), at(split, 5))
	br.screenshot("first-paint")
	br.clean()
}

func at(v []float64, i int) float64 {
	if i < len(v) {
		return v[i]
	}
	return -1
}

// BenchmarkConsoleLiveLatency: an event published through the kernel's
// socket to its element in the page's DOM, timed by a MutationObserver
// (the browser's clock and ours are the machine's). Target: p50 < 50 ms.
func BenchmarkConsoleLiveLatency(b *testing.B) {
	home := newHome(b)
	d := startDaemon(b, home)
	c := d.dial()
	br := newBrowser(b)
	br.open(d.url())
	eval[bool](br, `(() => {
		window.seen = {};
		new MutationObserver(ms => {
			const now = performance.timeOrigin + performance.now();
			for (const m of ms) for (const n of m.addedNodes)
				if (n.dataset && n.dataset.type === "app.bench.latency") window.seen[n.dataset.seq] = now;
		}).observe(document.getElementById("others"), {childList: true});
		return true;
	})()`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var ms []float64
	b.ResetTimer()
	for i := range b.N {
		sent := time.Now()
		res, err := c.Publish(ctx, eventOf("app.bench.latency", map[string]int{"i": i}))
		if err != nil {
			b.Fatal(err)
		}
		expr := fmt.Sprintf(`window.seen[%d] || 0`, res.Seq)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			at := eval[float64](br, expr)
			if at > 0 {
				ms = append(ms, at-float64(sent.UnixNano())/1e6)
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("event %d not in the page after 30s\n%s", res.Seq, br.report())
			}
		}
	}
	b.StopTimer()
	sort.Float64s(ms)
	p50, p90 := ms[len(ms)/2], ms[len(ms)*9/10]
	b.ReportMetric(p50, "ms")
	b.ReportMetric(p90, "p90-ms")
	b.Logf("publish to DOM over %d events: p50 %.1f ms, p90 %.1f ms", len(ms), p50, p90)
	br.clean()
}
