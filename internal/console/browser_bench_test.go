package console_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
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
// among app events); from the page's request to its run loops on the
// screen, as the page measures it: the Element Timing of the newest run
// loop's header, the frame that showed it presented (its origin is the
// navigation's start). Until 2026-11-29 the page marked the end of the
// frame's main-thread part instead (performance.now() after the frame),
// which is earlier than the screen by the frame's raster and compositing:
// tens of ms quiet, more under load. Goal: ≤ 250 ms in every run. It reports the p50 of the runs (ms) and the worst (max-ms);
// cold-ms is the first page of a browser just started (its login, its
// files not yet cached), and the log says how long the browser took to
// start, which no run counts.
//
// The floor, floor-ms, is measured in the same rounds, interleaved: the
// first contentful paint of a page of the same server that reads nothing
// (its stylesheet, as text), which is what Chromium costs to navigate and
// draw here; x-floor is the median of the rounds' ratios to it, and
// cpu-ms the median CPU of a run (the browser's processes and the
// daemon's), the figures a loaded machine moves least.
//
// Where the time went, measured on 2 loaded cores (pprof of the daemon,
// the page's resource timing, a DevTools trace's thread CPU): the page
// asked for the whole window, 10,000 events, 2.5 MB of JSON, of which it
// draws the run loops' and the newest 300 others'. The daemon spent ~50 ms
// of CPU a read on it (JSON encoding 36 %, MsgPack to JSON 24 %, SQLite
// 15 %), 130-300 ms until the first byte under load; the page 60-140 ms
// parsing it and 35-65 ms folding it; and it asked only once app.js had
// run, after a round trip for the agents. Now the first read carries the
// run loops' events and the newest 300 others (outside=300: ~95 kB),
// preloaded by index.html while the script loads, and the rest of the
// window follows after the paint; the 300 rows below the run loops are
// not laid out until scrolled to (content-visibility), and the chat's
// scroll waits for the frame's layout.
//
// What stands between the page and the goal: the machine. A trace of a
// run shows ~110 ms of the renderer's main-thread CPU (Chromium's commit,
// parse and script ~25 ms, the fold ~20 ms, the frame's style, layout and
// paint ~40 ms) within 280-640 ms of wall time: on 2 cores shared with
// other work the renderer and the daemon wait for a CPU most of the run,
// and floor-ms, a page that reads nothing, rose from ~130 ms to above
// 400 ms under load average 19, past the goal itself. Of Kairo's own, the
// largest item was then the daemon's scan of the window: SQLite stepped
// and decoded all 10,000 rows to answer a few hundred, a read of 87-145 ms
// (Server-Timing) on the loaded machine, cold or not. The console now
// keeps a run index (runindex.go): the seqs of the newest 20,000 events
// that are in run loops, fed by a lingering subscription to the log and
// by the reads themselves, so a read asks the store for the run loops'
// events and the newest 300 others only: 8-25 ms warm, 15-55 ms for the
// first read after the log was filled, on the same loaded machine (once
// 138 ms, beside the cold page's read of the whole window). The agents,
// which the page awaits before it folds, are preloaded beside the events,
// and the page's files are revalidated (ETag), not fetched again.
//
// What remains: the page asks 65-310 ms after the navigation's start
// (Chromium's commit, the HTML; the preloads ask as the HTML is parsed,
// with the same credentials and headers as the script's fetch, so each
// is used, not fetched twice), app.js runs only at DOMContentLoaded
// (30-200 ms after the answer came, under load), then parses and folds
// ~95 kB (20-50 ms) and draws (50-160 ms): the renderer's CPU, which
// waits for one of the 2 shared cores; floor-ms, a page that reads
// nothing, is 110-290 ms under load by itself. In an ABBA of four runs
// on the loaded machine the wall figures of before and after did not
// separate (p50 243-281 ms both, x-floor 1.7-2.2 both): the read's
// 60-190 ms are gone, the wait for the renderer's CPU is not.
//
// Where the frame's time went (DevTools traces of runs under load 10-16,
// the renderer's thread CPU, 2026-11-29): the fold was done at 200-260 ms
// and its frame took 56 ms of the renderer's main-thread CPU, style for
// 723 elements 16 ms, layout 10, pre-paint and paint 15; 300 of those
// elements were the rows of other events, below the run loops and off the
// screen. The frame then waited 100 ms or more to be presented (the
// tiles' raster, the display compositor's draw), while the page had
// already asked for the approvals, the stream, the plugins, the tools and
// the status, and, after the frame's main-thread part, for the whole
// window again: 2.5 MB for the daemon to encode and the page to parse, on
// the 2 cores the raster and the draw needed. Now the page asks for none
// of these until the run loop's header is on the screen (firstPaint), and
// draws the rows of other events after it: the first frame styles 423
// elements, 22-29 ms of main-thread CPU in the same traces.
//
// What remains, from the same traces: the data came at 150-250 ms
// (the daemon's read, 16-92 ms under load, and waits for a CPU), so on a
// loaded machine the page often waits for the read, not for its script;
// app.js was revalidated at each navigation (no longer: below), and in a
// trace its V8 code cache was produced again, not consumed (5-7 ms of
// compile); and the presentation after the frame's main-thread part,
// 40-100 ms of wall (raster, the display compositor's draw, once 60 ms
// waiting on the GPU process, which was freeing the previous page's
// images). Tried and not kept: content-visibility on the run loops,
// which with 3 run loops in a 1000-pixel window skips none (all are
// within the viewport's margin: 423 → 395 elements styled) and adds a
// layout pass.
//
// Where the worst runs' time went, by the phases each run now logs
// (under -v; ms from the navigation's start, 2026-11-29, load 13-21 on
// the 2 cores): the HTML came at 10-90 ms; the stylesheet, then the
// script, were each revalidated (a 304, one after the other: Chromium
// asks for a deferred script only once the stylesheet is in), so the
// script began at 108-373 ms, often after the events had come (93-284);
// the events were parsed 20-110 ms after they came and folded 10-60 ms
// later; and the frame that showed the header was presented 100-270 ms
// after the fold, the largest and most variable phase, with ~25 ms of
// the renderer's main-thread CPU in it. The page now names its
// stylesheet and script by pinned names (a hash of their content,
// Cache-Control: immutable; assets.go), which a navigation takes from
// the cache without a request: the script began at 46-265 ms in the same
// conditions, and compiled from its code cache (0.1 ms in a trace). The daemon's read, 7-111 ms of the answer's wait (Server-
// Timing), is gone from a reload: the answer to the first read is kept
// until the log grows (answerCache in api.go), and the events' first
// byte came 2-10 ms after they were asked. What remains is Chromium's,
// waiting for a CPU: the events parsed 20-150 ms after they came, and
// the header presented 90-490 ms after the fold. A DevTools trace of the
// fold's frame, under load 12: the renderer's main thread 20 ms of CPU
// (a forced style and layout in the chat's scroll callback, which is the
// frame's own, 15 ms; paint 4), the commit 4, the raster of ~60 tiles
// 18-26 ms of CPU over 80 ms of wall, the display compositor's draw 4:
// ~50 ms of CPU in four threads of three processes, which a machine at
// load 12 on 2 cores stretches to 150-450 ms. Tried and not kept: the
// page hidden (visibility) until the fold, so that no frame of the empty
// page came before the run loops': the fold's frame took as long (96-253
// ms after the fold).
//
// Tried and reverted (5b0fd8c, its revert after it): the daemon drawing the
// first screen into index.html (a Go port of the fold, the read as a JSON
// data block, the script adopting the daemon's elements after the first
// contentful paint). With this clock on both pages, in three ABBA rounds
// of 5 runs under load 14-24: p50 708/708/692 ms against the script's
// 576/700/532, x-floor 2.5-3.5 against 1.3-2.4, cpu-ms 690-780 against
// 500-600. On 2 saturated cores the path is CPU, not the request chain:
// the daemon's drawing (~13 ms of CPU, 100-250 ms of wall under load) and
// the parse of a 208 kB page replace a JSON parse and the fold, and the
// first frame of a page whose whole body is there cost more than the frame
// that adds rows to a skeleton already painted. It may still win on a
// quiet machine, where the chain's waits are what is left; unmeasured.
//
// Where a run's CPU went, 2026-11-29 (load 34-39 on the 2 cores): a
// DevTools trace of 5 navigations a build, each thread's CPU from the
// navigationStart to the header's paint, tracing on. The browser's main
// thread 105-165 ms (Chromium's navigation), the renderer's main
// thread 100-130 (style and layout 18-22, most of it run early in the
// frame's own requestAnimationFrame callbacks: no second layout), the
// raster of tiles (ThreadPoolForegroundWorker, RasterTask) 82-99, the
// display compositor (VizCompositorThread; SoftwareRenderer::DoDrawQuad
// 52-80: with --disable-gpu each frame is composited in software across
// the 1400×1000 window), the renderer's compositor 33-63. Raster and
// software drawing are half the renderer's CPU, over every frame of the
// window (the skeleton's, the fold's), not the fold's frame alone. In 5
// more traced runs (load 28): ~80 tiles rastered a run (1.1 ms of CPU
// each), and 17.6 draws of the display compositor a run (5.3 ms each, 93
// ms), where the renderer began 2.8 main frames and drew 2.2 frames of
// its own: most of the display compositor's draws are not the page's
// frames. Which client damaged them is unmeasured (a suspect: the
// browser's own window, hidden in headless mode, while the tab loads). Tried
// and not kept: the parts of the run loops that begin below the screen
// hidden (visibility, their layout kept) in the fold's frame and shown
// after the paint, so that it rasters the first screen, not the 1-2
// screens of run loops under it. In the first traces, ABBA of 5 runs each
// (old new new old): raster 98.5/89.9/93.0/81.8 ms of CPU a run, the
// display compositor's draw 80/69/83/52, the paint's median 2436/1696/
// 1672/1156 ms (tracing on); this benchmark ABBA, 10 runs each, load
// rising 17 → 41: p50 680/1128/1452/1424 ms, x-floor 2.07/2.19/1.45/
// 1.31, cpu-ms 660/770/770/710. Neither separated. What stands between
// Kairo and the goal is still the machine: floor-ms alone was 300-1144 ms
// in those runs. Left to measure, on a quieter machine: the CPU per frame
// (by the trace's frame sequence), not per window, and whether fewer
// frames before the fold's (the skeleton's first contentful paint, which
// the fold's frame rasters and draws again) save CPU: the hidden page
// above was measured by the clock only.
//
// The first run, 2026-11-30: it was the worst of most runs (292-384 ms
// where the others read 168-236, load 1-6), and took 130-300 ms more of
// the browser's CPU than the median. By process (/proc, each run): the
// cold page's renderer, which Chromium kept apart from the one the runs
// use, went on taking 90-230 ms of CPU each 250 ms for about a second
// after the browser left it, 130 ms of it inside the first run and 100
// inside the second; the runs after paid for leaving their own pages in
// the floor's round before them. Each timed navigation now begins with
// the browser settled (settled: its CPU at most 20 ms in 200, within
// 5 s, logged), so that no run pays for letting go of the page before
// it: ABBA at load 4-6, 10 runs each, the first run 296 and 384 ms
// (max-ms 296, 384) before, 232 and 260 after (max-ms 236, 260); p50
// 212, 192 -> 212, 200, floor-ms 120 in all four. The first run still
// takes ~100 ms more of the browser's CPU than the median, unexplained.
func BenchmarkConsoleFirstPaint(b *testing.B) {
	home := newHome(b)
	d := startDaemon(b, home)
	for _, cmd := range []string{"run echo one", "run seq 1 50", "run true"} {
		kairo(b, home, "send", cmd)
	}
	fill(b, d.dial(), 10000)
	started := time.Now()
	br := newBrowser(b)
	browserStart := time.Since(started)
	url := d.url()
	br.open(url) // the cookie
	br.wait("its first paint", `document.body.dataset.painted && document.querySelectorAll(".loop").length >= 3`, time.Minute)
	// Where the time of a run went: the server's answer, then the page.
	const split = `(() => {
		const e = performance.getEntriesByType("resource").find(e => e.name.includes("/api/events"));
		const m = (n) => (performance.getEntriesByName(n)[0] || {}).startTime;
		const read = (e && e.serverTiming.find(t => t.name === "read")) || {};
		return e ? [e.requestStart, e.responseStart, e.responseEnd, m("kairo:read"), m("kairo:folded"), Number(document.body.dataset.painted), e.encodedBodySize, read.duration] : [];
	})()`
	// The phases of a run, ms from the navigation's start: the HTML
	// answered, app.js asked and answered (its bytes: 0 from the cache
	// without a request), the script begun, the events asked, answered
	// (the daemon's read), parsed and folded, and the header painted.
	const phases = `(() => {
		const r = (s) => performance.getEntriesByType("resource").find(e => e.name.includes(s)) || {};
		const m = (n) => (performance.getEntriesByName(n)[0] || {}).startTime || -1;
		const nav = performance.getEntriesByType("navigation")[0] || {};
		const js = performance.getEntriesByType("resource").find(e => /\/app\.(\w+\.)?js/.test(e.name)) || {}, ev = r("/api/events");
		const css = performance.getEntriesByType("resource").find(e => /\/app\.(\w+\.)?css/.test(e.name)) || {};
		const read = ((ev.serverTiming || []).find(t => t.name === "read") || {}).duration || -1;
		return [nav.responseEnd, js.requestStart || -1, js.responseEnd || -1, js.transferSize || 0, m("kairo:script"), nav.domContentLoadedEventStart,
			ev.requestStart || -1, ev.responseStart || -1, ev.responseEnd || -1, read, m("kairo:read"), m("kairo:folded"), Number(document.body.dataset.painted),
			ev.fetchStart || -1, (ev.connectEnd - ev.connectStart) || 0, m("first-contentful-paint"), css.requestStart || -1, css.responseEnd || -1];
	})()`
	var phaseLog []string
	phase := func() {
		p := eval[[]float64](br, phases)
		phaseLog = append(phaseLog, fmt.Sprintf("html %3.0f css %3.0f-%3.0f fcp %3.0f | app.js %3.0f-%3.0f (%4.0f B) run %3.0f dcl %3.0f | events %3.0f/%3.0f-%3.0f-%3.0f (conn %2.0f read %3.0f) parsed %3.0f folded %3.0f | painted %3.0f",
			at(p, 0), at(p, 16), at(p, 17), at(p, 15), at(p, 1), at(p, 2), at(p, 3), at(p, 4), at(p, 5), at(p, 13), at(p, 6), at(p, 7), at(p, 8), at(p, 14), at(p, 9), at(p, 10), at(p, 11), at(p, 12)))
	}
	phase()
	cold := eval[float64](br, `Number(document.body.dataset.painted)`)
	coldSplit := eval[[]float64](br, split)
	// The cold page reads the rest of the window after its paint: held
	// before the first run, as each run's is before the floor's round,
	// so that no run pays for the page before it.
	br.wait("the whole window held", `document.body.dataset.held === "1"`, time.Minute)
	page := strings.SplitN(url, "?", 2)[0]
	floorPage := page + "app.css"

	// The CPU a run costs, the browser's processes and the daemon's, from
	// the navigation to its paint seen: steadier than the clock on a
	// loaded machine.
	browserPid := chromedp.FromContext(br.ctx).Browser.Process().Pid
	pids := []int{browserPid, d.cmd.Process.Pid}
	var runs, floors, ratios, cpu, settles []float64
	var worst []float64
	// Each navigation timed begins with the browser settled: the page
	// before it, the floor's or a run's, let go of. Leaving a page that
	// holds the whole window costs its renderer 0.3-0.5 s of CPU after
	// the next page began (measured by process: the old page's renderer,
	// kept apart from the new page's, 130 ms in the run after the cold
	// page and 100 in the one after that), which the runs after the
	// first paid in the floor's round before them, and the first run,
	// which followed the cold page, paid itself: it was the worst run of
	// most and took 130-300 ms more of the browser's CPU than the median.
	settle := func() {
		if w := settled(browserPid); w >= 0 {
			settles = append(settles, float64(w.Milliseconds()))
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		settle()
		b.StartTimer()
		cpu0 := treeCPU(pids...)
		br.do(chromedp.Navigate(page))
		br.wait("its first paint", `document.body.dataset.painted && document.querySelectorAll(".loop").length >= 3`, time.Minute)
		cpu = append(cpu, float64(treeCPU(pids...)-cpu0)/1e6)
		ms := eval[float64](br, `Number(document.body.dataset.painted)`)
		if len(runs) == 0 || ms > slices.Max(runs) {
			worst = eval[[]float64](br, split)
		}
		runs = append(runs, ms)
		phase()
		// The rest of the window is read after the paint: held before the
		// floor's round, which would otherwise pay for it.
		br.wait("the whole window held", `document.body.dataset.held === "1"`, time.Minute)
		b.StopTimer()
		settle()
		b.StartTimer()
		br.do(chromedp.Navigate(floorPage))
		br.wait("the floor's paint", `performance.getEntriesByName("first-contentful-paint").length > 0`, time.Minute)
		floor := eval[float64](br, `performance.getEntriesByName("first-contentful-paint")[0].startTime`)
		floors = append(floors, floor)
		ratios = append(ratios, ms/floor)
	}
	b.StopTimer()
	runCPU := slices.Clone(cpu)
	p50, most, floor := median(runs), slices.Max(runs), median(floors)
	b.ReportMetric(p50, "ms")
	b.ReportMetric(most, "max-ms")
	b.ReportMetric(cold, "cold-ms")
	b.ReportMetric(floor, "floor-ms")
	b.ReportMetric(median(ratios), "x-floor")
	b.ReportMetric(median(cpu), "cpu-ms")
	b.ReportMetric(at(worst, 6)/1000, "kB-read")
	b.Logf("first paint of a 10,000-event log over %d runs: p50 %.1f ms, max %.1f ms, %.2f× the floor (a page that reads nothing: p50 %.1f ms), %.0f ms of CPU (browser and daemon); cold, in a browser that took %v to start: %.1f ms",
		len(runs), p50, most, median(ratios), floor, median(cpu), browserStart.Round(time.Millisecond), cold)
	for _, r := range []struct {
		name  string
		split []float64
	}{{"the cold run", coldSplit}, {"the worst run", worst}} {
		b.Logf("%s: /api/events asked at %.0f ms, answered %.0f-%.0f ms (%.0f kB; the daemon's read %.0f ms of it), parsed at %.0f ms, folded into the DOM at %.0f ms, drawn at %.0f ms",
			r.name, at(r.split, 0), at(r.split, 1), at(r.split, 2), at(r.split, 6)/1000, at(r.split, 7), at(r.split, 3), at(r.split, 4), at(r.split, 5))
	}
	for i, l := range phaseLog {
		if i > 0 && i <= len(runCPU) {
			l += fmt.Sprintf(" | cpu %3.0f", runCPU[i-1])
		}
		b.Logf("run %2d: %s", i, l)
	}
	if len(settles) > 0 {
		b.Logf("the browser settled in p50 %.0f ms, at most %.0f, before each of %d navigations (%d waits cut at %v)",
			median(settles), slices.Max(settles), 2*b.N, 2*b.N-len(settles), maxSettle)
	}
	br.do(chromedp.Navigate(page))
	br.wait("the whole window held", `document.body.dataset.held === "1" && document.querySelectorAll(".loop").length >= 3`, time.Minute)
	if n := eval[int](br, `Number(document.body.dataset.events)`); n != 10000 {
		b.Errorf("the page holds %d events after the paint, want the window's 10,000", n)
	}
	br.screenshot("first-paint")
	br.clean()
}

// settled waits until the browser's processes use at most settledCPU of
// CPU in a settleWindow, and says how long that took; -1 when it has not
// come by maxSettle, which it then logs nowhere but the count of cuts.
func settled(browserPid int) time.Duration {
	start := time.Now()
	for time.Since(start) < maxSettle {
		c0 := treeCPU(browserPid)
		time.Sleep(settleWindow)
		if treeCPU(browserPid)-c0 <= settledCPU {
			return time.Since(start)
		}
	}
	return -1
}

// An idle browser here takes 0-10 ms of CPU in 200 ms (one or none of
// /proc's 10 ms ticks); one letting go of a page, 90-230.
const (
	settleWindow = 200 * time.Millisecond
	settledCPU   = 20 * time.Millisecond
	maxSettle    = 5 * time.Second
)

// median is the middle of v (v is reordered).
func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

// treeCPU is the CPU time the processes pids and their descendants have
// used, as /proc has it (Linux, USER_HZ 100).
func treeCPU(pids ...int) time.Duration {
	ents, _ := os.ReadDir("/proc")
	parent, ticks := map[int]int{}, map[int]int64{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 || i+2 > len(stat) {
			continue // gone meanwhile
		}
		// After the command: state, ppid, ... utime and stime, the 12th and 13th.
		f := strings.Fields(string(stat[i+2:]))
		if len(f) < 13 {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks[pid] = ut + st
	}
	var sum int64
	for pid, t := range ticks {
		for p := pid; p > 1; p = parent[p] {
			if slices.Contains(pids, p) {
				sum += t
				break
			}
		}
	}
	return time.Duration(sum) * 10 * time.Millisecond
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
