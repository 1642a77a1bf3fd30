package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/llmscript"
	"github.com/kairo-os/kairo/internal/telemetry"
	obs "github.com/kairo-os/kairo/internal/testkit/observe"
)

// Each run loop a trace, through a real `kairo up` and a real Jaeger: the
// trace's tree and attributes as Jaeger's query API returns them, over
// OTLP/HTTP and OTLP/gRPC; the export catching up after the receiver was
// down, across a daemon restart, and within [telemetry] max_backlog;
// `kairo traces export` sending a past run loop again; and headers whose
// value is a secret.

// telemetryTable is a [telemetry] table sending traces to endpoint over
// protocol, with /metrics on a free port; more lines may follow.
func telemetryTable(endpoint, protocol string, more ...string) string {
	return fmt.Sprintf("\n[telemetry]\notlp_endpoint = %q\notlp_protocol = %q\nmetrics_listen = \"127.0.0.1:0\"\n%s\n",
		endpoint, protocol, strings.Join(more, "\n"))
}

// traceOf waits, 40 s at most (the export retries with a backoff of up to
// 30 s), for run loop id's trace in j to hold the spans named ops, and
// returns it.
func traceOf(t *testing.T, j *obs.JaegerServer, id string, ops ...string) *obs.Trace {
	t.Helper()
	// 90 s: after a receiver comes back the export retries within its
	// backoff (at most 30 s, after a request that may itself take 10 s to
	// fail), then sends what it held, on a machine that may be loaded.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tr, err := j.WaitTrace(ctx, telemetry.TraceIDOf(id), func(tr *obs.Trace) bool {
		for _, op := range ops {
			if tr.Span(op) == nil {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("the trace of run loop %s with %q: %v\n%s", id, ops, err, traceTree(tr))
	}
	return tr
}

// absent fails unless j holds no span of run loop id's trace.
func absent(t *testing.T, j *obs.JaegerServer, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := j.Trace(ctx, telemetry.TraceIDOf(id))
	if !errors.Is(err, obs.ErrTraceNotFound) {
		t.Fatalf("run loop %s's trace: %v; want none\n%s", id, err, traceTree(tr))
	}
}

// traceTree is a trace as a tree of span names with their tags, for a
// failure to show.
func traceTree(tr *obs.Trace) string {
	if tr == nil {
		return "(no trace)"
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range tr.Spans {
			if s.ParentSpanID() != parent {
				continue
			}
			fmt.Fprintf(&b, "%s%s %s", strings.Repeat("  ", depth), s.SpanID, s.OperationName)
			for _, kv := range s.Tags {
				fmt.Fprintf(&b, " %s=%v", kv.Key, kv.Value)
			}
			b.WriteByte('\n')
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	// A span whose parent is not in the trace shows too.
	ids := map[string]bool{"": true}
	for _, s := range tr.Spans {
		ids[s.SpanID] = true
	}
	for _, s := range tr.Spans {
		if !ids[s.ParentSpanID()] {
			fmt.Fprintf(&b, "orphan %s %s (parent %s)\n", s.SpanID, s.OperationName, s.ParentSpanID())
		}
	}
	return b.String()
}

// span is the span named op of tr, failing the test if there is none.
func span(t *testing.T, tr *obs.Trace, op string) obs.Span {
	t.Helper()
	s := tr.Span(op)
	if s == nil {
		t.Fatalf("no span %q:\n%s", op, traceTree(tr))
	}
	return *s
}

// spanByID is tr's span id, or nil.
func spanByID(tr *obs.Trace, id string) *obs.Span {
	for i := range tr.Spans {
		if tr.Spans[i].SpanID == id {
			return &tr.Spans[i]
		}
	}
	return nil
}

// parentOp is the name of s's parent in tr, "" for a root, "?" for a
// parent not in tr.
func parentOp(tr *obs.Trace, s obs.Span) string {
	p := s.ParentSpanID()
	if p == "" {
		return ""
	}
	if ps := spanByID(tr, p); ps != nil {
		return ps.OperationName
	}
	return "?"
}

// wantTag fails unless s has tag key with the value want (numbers as
// Jaeger's JSON has them, float64).
func wantTag(t *testing.T, tr *obs.Trace, s obs.Span, key string, want any) {
	t.Helper()
	got, ok := s.Tag(key)
	if !ok || got != want {
		t.Fatalf("span %q: tag %s = %v (%T, present %v); want %v\n%s", s.OperationName, key, got, got, ok, want, traceTree(tr))
	}
}

// spanIDs are tr's span ids, sorted.
func spanIDs(tr *obs.Trace) []string {
	var ids []string
	for _, s := range tr.Spans {
		ids = append(ids, s.SpanID)
	}
	slices.Sort(ids)
	return ids
}

// checkSeqAndService fails unless every span of tr carries kairo.seq and
// comes from service.
func checkSeqAndService(t *testing.T, tr *obs.Trace, service string) {
	t.Helper()
	for _, s := range tr.Spans {
		if v, ok := s.Tag("kairo.seq"); !ok || v.(float64) <= 0 {
			t.Fatalf("span %q has kairo.seq %v (present %v):\n%s", s.OperationName, v, ok, traceTree(tr))
		}
		if got := tr.ServiceName(s); got != service {
			t.Fatalf("span %q comes from the service %q; want %q", s.OperationName, got, service)
		}
	}
}

// sendTask sends text as a task and waits until it ended; it returns the
// run loop's id.
func sendTask(t *testing.T, home, text string) string {
	t.Helper()
	if r := kairo(t, home, "send", text); r.code != 0 {
		t.Fatalf("send %q:\n%s", text, r)
	}
	var id string
	until(t, "the end of "+text, func() bool {
		for _, o := range runList(t, home) {
			if o.Goal == text {
				id = o.ID
				return o.EndedAt != ""
			}
		}
		return false
	})
	return id
}

var metricsLine = regexp.MustCompile(`metrics at (http://\S+/metrics)`)

// metricsURL is the /metrics address the daemon of home logged last.
func metricsURL(t *testing.T, home string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(home, "kairo.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := metricsLine.FindAllSubmatch(raw, -1)
	if m == nil {
		t.Fatalf("the daemon logged no metrics address:\n%s", raw)
	}
	return string(m[len(m)-1][1])
}

// metric is the value of the series name at url, -1 when it is absent.
func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	v, _ := obs.Scrape(t, url, regexp.QuoteMeta(name))
	return v
}

// A run loop of the LLM policy against a scripted model that runs `exit 3`
// and, told of the exit, answers: Jaeger holds its trace with the span
// tree and attributes of internal/telemetry/spans.go, the model calls'
// token usage what the model reported, the process's failure an error
// (and, the control, `echo hi`'s success none). The same over OTLP/gRPC,
// with another service name. Then `kairo traces export` sends the trace
// again to an emptied Jaeger, with the same span ids; its denials beside.
func TestTracesInJaeger(t *testing.T) {
	j := obs.Jaeger(t)

	var usage sync.Map // request n → [2]int, what the model reported
	model := &llmscript.Server{
		Think: llmscript.Summarizing(func(n int, system, prompt string) map[string]any {
			s := llmscript.Read(prompt)
			m := s.Last()
			task := s.Task("run ")
			switch {
			case strings.HasPrefix(m.Text, "run "):
				return llmscript.Calls("process_spawn", map[string]any{"command": strings.TrimPrefix(m.Text, "run "), "answers": m.Label})
			case m.Text == "" && task != nil && len(task.Running) == 0:
				return llmscript.Actions(map[string]any{"type": "say", "text": "Done.", "done": true, "runLoopId": task.ID})
			}
			return llmscript.Noop()
		}),
		Usage: func(n int) (int, int) {
			in, out := 1000+17*n, 30+n
			usage.Store(in, out)
			return in, out
		},
	}
	srv := httptest.NewServer(model)
	defer srv.Close()
	home := t.TempDir()
	writeConfig(t, home, llmConfig(t, srv.URL)+telemetryTable(j.OTLPHTTP, "http/protobuf"))
	startUp(t, home)

	const goal = "run exit 3"
	id := sendTask(t, home, goal)
	tr := traceOf(t, j, id, "invoke_agent default", "iteration 1", "iteration 2", "decide", "chat scripted",
		"execute_tool process.spawn", "process sh")

	t.Run("tree", func(t *testing.T) {
		if tr.TraceID != strings.ReplaceAll(id, "-", "") {
			t.Fatalf("trace id %s; want the run loop's id %s without dashes", tr.TraceID, id)
		}
		root := span(t, tr, "invoke_agent default")
		if p := root.ParentSpanID(); p != "" {
			t.Fatalf("the root has the parent %s:\n%s", p, traceTree(tr))
		}
		wantTag(t, tr, root, "gen_ai.operation.name", "invoke_agent")
		wantTag(t, tr, root, "kairo.run_loop.id", id)
		wantTag(t, tr, root, "kairo.run_loop.status", "done")
		wantTag(t, tr, root, "kairo.run_loop.goal", goal)
		// Every other span has its parent in the trace.
		for _, s := range tr.Spans {
			if s.SpanID != root.SpanID && (s.ParentSpanID() == "" || parentOp(tr, s) == "?") {
				t.Fatalf("span %q has no parent in the trace:\n%s", s.OperationName, traceTree(tr))
			}
		}
		if it := span(t, tr, "iteration 1"); it.ParentSpanID() != root.SpanID {
			t.Fatalf("iteration 1 is under %q; want the root:\n%s", parentOp(tr, it), traceTree(tr))
		}
		var decides, chats int
		for _, s := range tr.Spans {
			switch s.OperationName {
			case "decide":
				decides++
				if p := parentOp(tr, s); !strings.HasPrefix(p, "iteration ") {
					t.Fatalf("a decide is under %q; want an iteration:\n%s", p, traceTree(tr))
				}
			case "chat scripted":
				chats++
				if p := parentOp(tr, s); p != "decide" {
					t.Fatalf("a model call is under %q; want a decide:\n%s", p, traceTree(tr))
				}
				wantTag(t, tr, s, "gen_ai.operation.name", "chat")
				wantTag(t, tr, s, "gen_ai.request.model", "scripted")
				in, _ := s.Tag("gen_ai.usage.input_tokens")
				out, _ := s.Tag("gen_ai.usage.output_tokens")
				fin, _ := in.(float64)
				reported, ok := usage.LoadAndDelete(int(fin))
				if !ok || float64(reported.(int)) != out {
					t.Fatalf("a model call has %v input and %v output tokens; the model reported no such pair once:\n%s", in, out, traceTree(tr))
				}
			}
		}
		if decides < 2 || chats < 2 {
			t.Fatalf("%d decides and %d model calls; want one of each per iteration at least:\n%s", decides, chats, traceTree(tr))
		}
		tool := span(t, tr, "execute_tool process.spawn")
		if p := parentOp(tr, tool); !strings.HasPrefix(p, "iteration ") {
			t.Fatalf("the tool call is under %q; want an iteration:\n%s", p, traceTree(tr))
		}
		wantTag(t, tr, tool, "gen_ai.tool.name", "process.spawn")
		proc := span(t, tr, "process sh")
		if proc.ParentSpanID() != tool.SpanID {
			t.Fatalf("the process is under %q; want the tool call:\n%s", parentOp(tr, proc), traceTree(tr))
		}
		wantTag(t, tr, proc, "process.exit.code", float64(3))
		wantTag(t, tr, proc, "error", true)
		wantTag(t, tr, proc, "otel.status_code", "ERROR")
		if _, ok := root.Tag("error"); ok {
			t.Fatalf("the root of a run loop that ended done is an error:\n%s", traceTree(tr))
		}
		checkSeqAndService(t, tr, "kairo")
	})

	t.Run("grpc", func(t *testing.T) {
		home := t.TempDir()
		writeConfig(t, home, telemetryTable("http://"+j.OTLPGRPC, "grpc", `service_name = "kairo-grpc"`))
		startUp(t, home)
		id := sendTask(t, home, "run echo hi")
		tr := traceOf(t, j, id, "invoke_agent default", "execute_tool process.spawn", "process sh")
		tool, proc := span(t, tr, "execute_tool process.spawn"), span(t, tr, "process sh")
		if parentOp(tr, tool) != "iteration 1" || proc.ParentSpanID() != tool.SpanID || span(t, tr, "invoke_agent default").ParentSpanID() != "" {
			t.Fatalf("the tree over gRPC:\n%s", traceTree(tr))
		}
		// The control of the failed process: a success is no error.
		wantTag(t, tr, proc, "process.exit.code", float64(0))
		if v, ok := proc.Tag("error"); ok {
			t.Fatalf("`echo hi`'s process has error=%v:\n%s", v, traceTree(tr))
		}
		checkSeqAndService(t, tr, "kairo-grpc")
	})

	t.Run("export", func(t *testing.T) {
		before := spanIDs(tr)
		other := sendTask(t, home, "run echo two")
		traceOf(t, j, other, "invoke_agent default", "process sh")

		j.Restart()
		absent(t, j, id)
		// The run loop named as `kairo runs` shows it: its id's end.
		short := id[len(id)-8:]
		r := kairo(t, home, "traces", "export", "--run", short)
		if want := fmt.Sprintf("sent %d spans of 1 run loops", len(before)); r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, id) {
			t.Fatalf("traces export --run %s:\n%s\nwant %q about %s", short, r, want, id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		again, err := j.WaitTrace(ctx, telemetry.TraceIDOf(id), func(tr *obs.Trace) bool { return len(tr.Spans) >= len(before) })
		if err != nil {
			t.Fatal(err)
		}
		if got := spanIDs(again); !slices.Equal(got, before) {
			t.Fatalf("exported again, the span ids are\n%v\nwere\n%v", got, before)
		}
		// Only the run loop named went: the other is not there.
		absent(t, j, other)

		j.Restart()
		if r := kairo(t, home, "traces", "export", "--since", "1h"); r.code != 0 || !strings.Contains(r.stdout, "of 2 run loops") {
			t.Fatalf("traces export --since 1h:\n%s", r)
		}
		traceOf(t, j, id, "invoke_agent default", "process sh", "chat scripted")
		traceOf(t, j, other, "invoke_agent default", "process sh")
	})

	t.Run("export denied", func(t *testing.T) {
		r := kairo(t, home, "traces", "export")
		if r.code != 2 || !strings.Contains(r.stderr, "usage: kairo traces export") || !strings.Contains(r.stderr, "--run ID") {
			t.Fatalf("traces export with no flags:\n%s", r)
		}
		const unknown = "01a224fb-3d37-729f-82a6-000000000000"
		r = kairo(t, home, "traces", "export", "--run", unknown)
		if r.code != 1 || !strings.Contains(r.stderr, unknown) || strings.Contains(r.stdout, "sent") {
			t.Fatalf("traces export --run %s:\n%s", unknown, r)
		}
		// Traces off: the daemon says how to turn them on; the control is
		// the export above.
		off := t.TempDir()
		startUp(t, off)
		offID := sendTask(t, off, "run echo off")
		r = kairo(t, off, "traces", "export", "--run", offID)
		if r.code != 1 || !strings.Contains(r.stderr, "traces are off") || !strings.Contains(r.stderr, "otlp_endpoint") {
			t.Fatalf("traces export with traces off:\n%s", r)
		}
	})
}

// The receiver down: two run loops that ran meanwhile arrive complete once
// it is back; one that ran before the daemon stopped arrives after the
// daemon restarts (the export resumes from its state file); and past
// [telemetry] max_backlog the oldest are given up, counted on /metrics,
// while the newest still arrive.
func TestTracesCatchUp(t *testing.T) {
	j := obs.Jaeger(t)
	home := t.TempDir()
	writeConfig(t, home, telemetryTable(j.OTLPHTTP, "http/protobuf", "max_backlog = 50"))
	top := t // the daemon outlives each part
	d := startUp(top, home)
	first := sendTask(t, home, "run echo zero")
	traceOf(t, j, first, "invoke_agent default", "execute_tool process.spawn", "process sh")

	t.Run("receiver down", func(t *testing.T) {
		j.Stop()
		one := sendTask(t, home, "run echo one")
		two := sendTask(t, home, "run echo two")
		url := metricsURL(t, home)
		until(t, "a failed export", func() bool { return metric(t, url, "kairo_trace_export_failures_total") > 0 })
		j.Restart()
		for _, id := range []string{one, two} {
			traceOf(t, j, id, "invoke_agent default", "iteration 1", "execute_tool process.spawn", "process sh")
		}
	})

	t.Run("daemon restarted", func(t *testing.T) {
		j.Stop()
		three := sendTask(t, home, "run echo three")
		if code := d.stop(); code != 0 {
			t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
		}
		j.Restart()
		d = startUp(top, home)
		traceOf(t, j, three, "invoke_agent default", "iteration 1", "execute_tool process.spawn", "process sh")
	})

	t.Run("past the backlog", func(t *testing.T) {
		url := metricsURL(t, home)
		j.Stop()
		// The export gives up a batch whose newest event falls more than
		// 50 events behind the log's head, a task being about ten: old
		// tasks are sent until it has (the sender looks again after each
		// retry, within its backoff).
		givenUp := func() bool {
			return metric(t, url, "kairo_trace_spans_dropped_total") > 0 || metric(t, url, "kairo_trace_events_passed_total") > 0
		}
		var old []string
		for deadline := time.Now().Add(60 * time.Second); !givenUp(); {
			if len(old) == 40 || time.Now().After(deadline) {
				t.Fatalf("no spans given up after %d tasks", len(old))
			}
			old = append(old, sendTask(t, home, fmt.Sprintf("run echo old%d", len(old))))
		}
		// Sent while the receiver is still down, the newest is kept.
		newest := sendTask(t, home, "run echo newest")
		j.Restart()
		traceOf(t, j, newest, "invoke_agent default", "iteration 1", "execute_tool process.spawn", "process sh")
		absent(t, j, old[0])
	})
}

// Headers whose value is a secret: a receiver behind a proxy that refuses
// a request without the right X-Kairo-Auth gets the trace when the secret
// holds the right value; with a wrong one, nothing arrives and the
// failures are counted. The value is nowhere in the daemon's log.
func TestTracesHeaderSecret(t *testing.T) {
	j := obs.Jaeger(t)
	token, wrong := secretValue(t), secretValue(t)
	target, err := url.Parse(j.OTLPHTTP)
	if err != nil {
		t.Fatal(err)
	}
	var taken, refused atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Kairo-Auth") != token {
			refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		taken.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()

	home := t.TempDir()
	writeConfig(t, home, telemetryTable(srv.URL, "http/protobuf", `otlp_headers = { "X-Kairo-Auth" = "secret:otlp-token" }`))
	if r := kairoStdin(t, home, strings.NewReader(token+"\n"), "secrets", "set", "otlp-token"); r.code != 0 {
		t.Fatalf("secrets set:\n%s", r)
	}
	d := startUp(t, home)
	id := sendTask(t, home, "run echo right")
	traceOf(t, j, id, "invoke_agent default", "process sh")
	if taken.Load() == 0 {
		t.Fatal("the proxy passed no request on")
	}

	// The control: the secret's value is wrong.
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
	if r := kairoStdin(t, home, strings.NewReader(wrong+"\n"), "secrets", "set", "otlp-token"); r.code != 0 {
		t.Fatalf("secrets set:\n%s", r)
	}
	d = startUp(t, home)
	url := metricsURL(t, home)
	id = sendTask(t, home, "run echo wrong")
	until(t, "a refused export", func() bool { return metric(t, url, "kairo_trace_export_failures_total") > 0 && refused.Load() > 0 })
	absent(t, j, id)

	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
	raw, err := os.ReadFile(filepath.Join(home, "kairo.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "refuses spans") {
		t.Fatalf("the log does not say the receiver refuses spans:\n%s", raw)
	}
	if l := leaked(raw, forbidden(token, wrong)); l != "" {
		t.Fatalf("the daemon's log holds the secret: %s", l)
	}
}
