package observe

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testContext ends with the test, or after two minutes.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// postOTLP posts body to the OTLP/HTTP receiver as OTLP JSON.
func postOTLP(ctx context.Context, baseURL, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/traces", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/traces: %s", resp.Status)
	}
	return nil
}

// twoSpans is an OTLP/HTTP JSON body of a root span and its child, of
// service, the child 1.5 ms long with the attribute kairo.selftest = "yes".
func twoSpans(service, traceID, rootID, childID string, start time.Time) string {
	ns := func(d time.Duration) string { return fmt.Sprintf("%q", fmt.Sprint(start.Add(d).UnixNano())) }
	return fmt.Sprintf(`{"resourceSpans":[{
  "resource":{"attributes":[{"key":"service.name","value":{"stringValue":%q}}]},
  "scopeSpans":[{"scope":{"name":"observe-selftest"},"spans":[
    {"traceId":%q,"spanId":%q,"name":"selftest.root","kind":1,
     "startTimeUnixNano":%s,"endTimeUnixNano":%s},
    {"traceId":%q,"spanId":%q,"parentSpanId":%q,"name":"selftest.child","kind":1,
     "startTimeUnixNano":%s,"endTimeUnixNano":%s,
     "attributes":[{"key":"kairo.selftest","value":{"stringValue":"yes"}}]}
  ]}]}]}`, service, traceID, rootID, ns(0), ns(3*time.Millisecond),
		traceID, childID, rootID, ns(time.Millisecond), ns(2500*time.Microsecond))
}

func TestJaeger(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	j := Jaeger(t)

	// An upper half of zeros: Jaeger prints such an ID in 16 digits, the
	// decoder gives it back in 32.
	traceID := strings.Repeat("0", 16) + randomHex(8)
	rootID, childID := randomHex(8), randomHex(8)
	service := "observe-selftest-" + randomHex(2)

	if _, err := j.Trace(ctx, traceID); !errors.Is(err, ErrTraceNotFound) {
		t.Fatalf("Trace of a trace never sent: %v, want ErrTraceNotFound", err)
	}
	start := time.Now().Add(-time.Second)
	if err := postOTLP(ctx, j.OTLPHTTP, twoSpans(service, traceID, rootID, childID, start)); err != nil {
		t.Fatal(err)
	}
	tr, err := j.WaitTrace(ctx, traceID, func(tr *Trace) bool { return len(tr.Spans) == 2 })
	if err != nil {
		t.Fatalf("%v\n%s", err, j.Output())
	}
	if tr.TraceID != traceID {
		t.Errorf("trace ID %q, want %q", tr.TraceID, traceID)
	}
	root, child := tr.Span("selftest.root"), tr.Span("selftest.child")
	if root == nil || child == nil {
		t.Fatalf("spans %+v, want selftest.root and selftest.child", tr.Spans)
	}
	if root.SpanID != rootID || child.SpanID != childID {
		t.Errorf("span IDs %s and %s, want %s and %s", root.SpanID, child.SpanID, rootID, childID)
	}
	if p := root.ParentSpanID(); p != "" {
		t.Errorf("the root's parent is %q, want none", p)
	}
	if p := child.ParentSpanID(); p != rootID {
		t.Errorf("the child's parent is %q, want %s", p, rootID)
	}
	if child.TraceID != traceID {
		t.Errorf("the child's trace ID %q, want %q", child.TraceID, traceID)
	}
	if v, ok := child.Tag("kairo.selftest"); !ok || v != "yes" {
		t.Errorf("the child's tag kairo.selftest = %v, %v; want yes", v, ok)
	}
	if _, ok := root.Tag("kairo.selftest"); ok {
		t.Errorf("the root has the tag kairo.selftest it was not sent")
	}
	if child.Duration != 1500 {
		t.Errorf("the child lasted %dµs, want 1500", child.Duration)
	}
	if want := start.Add(time.Millisecond).UnixMicro(); child.StartTime != want {
		t.Errorf("the child started at %d, want %d", child.StartTime, want)
	}
	if s := tr.ServiceName(*child); s != service {
		t.Errorf("the child's service %q, want %q", s, service)
	}

	services, err := j.Services(ctx)
	if err != nil || !slices.Contains(services, service) {
		t.Errorf("Services = %q, %v; want %q among them", services, err, service)
	}
	traces, err := j.Traces(ctx, service, 10)
	if err != nil || len(traces) != 1 || traces[0].TraceID != traceID {
		t.Errorf("Traces(%q) = %d traces, %v; want the one sent", service, len(traces), err)
	}

	// Stopped, the receiver refuses; restarted on the same ports, it is
	// empty and receives again.
	otlp, query := j.OTLPHTTP, j.Query
	j.Stop()
	if err := postOTLP(ctx, j.OTLPHTTP, twoSpans(service, traceID, rootID, childID, start)); err == nil {
		t.Fatalf("a stopped Jaeger took spans")
	}
	j.Restart()
	if j.OTLPHTTP != otlp || j.Query != query {
		t.Errorf("restarted on %s and %s, want %s and %s", j.OTLPHTTP, j.Query, otlp, query)
	}
	if _, err := j.Trace(ctx, traceID); !errors.Is(err, ErrTraceNotFound) {
		t.Errorf("Trace after a restart: %v, want ErrTraceNotFound", err)
	}
	if err := postOTLP(ctx, j.OTLPHTTP, twoSpans(service, traceID, rootID, childID, start)); err != nil {
		t.Fatal(err)
	}
	if _, err := j.WaitTrace(ctx, traceID, func(tr *Trace) bool { return len(tr.Spans) == 2 }); err != nil {
		t.Fatalf("after a restart: %v\n%s", err, j.Output())
	}
}

// counterServer serves a counter in Prometheus's text format at /metrics,
// starting at start and requiring "Authorization: Bearer <token>" when
// token is set. It returns the counter and the server's host:port.
func counterServer(t *testing.T, start int64, token string) (*atomic.Int64, string) {
	value := new(atomic.Int64)
	value.Store(start)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP observe_selftest_total What the self-test moves.\n# TYPE observe_selftest_total counter\nobserve_selftest_total %d\n", value.Load())
	}))
	t.Cleanup(srv.Close)
	return value, strings.TrimPrefix(srv.URL, "http://")
}

func TestPrometheus(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	value, target := counterServer(t, 3, "")
	p := Prometheus(t, target, 200*time.Millisecond)

	if v, err := p.WaitFor(ctx, "observe_selftest_total", func(v float64) bool { return true }); err != nil || v != 3 {
		t.Fatalf("first scrape: %v, %v; want 3\n%s", v, err, p.Output())
	}
	value.Store(11)
	if _, err := p.WaitFor(ctx, "observe_selftest_total", func(v float64) bool { return v == 11 }); err != nil {
		t.Fatalf("after the counter moved to 11: %v", err)
	}
	if v, ok, err := p.Query(ctx, "observe_selftest_total * 2"); err != nil || !ok || v != 22 {
		t.Errorf("Query(observe_selftest_total * 2) = %v, %v, %v; want 22", v, ok, err)
	}
	if v, ok, err := p.Query(ctx, "observe_never_exported_total"); err != nil || ok {
		t.Errorf("Query of a metric never exported = %v, %v, %v; want no sample", v, ok, err)
	}
	if v, ok, err := p.Query(ctx, "scalar(observe_selftest_total) + 1"); err != nil || !ok || v != 12 {
		t.Errorf("Query of a scalar = %v, %v, %v; want 12", v, ok, err)
	}
	if _, _, err := p.Query(ctx, "observe_selftest_total{"); err == nil {
		t.Errorf("Query of malformed PromQL succeeded")
	}
	state, err := p.WaitScraped(ctx)
	if err != nil || state.Health != "up" || state.LastError != "" {
		t.Errorf("target %+v, %v; want up without error", state, err)
	}
}

func TestPrometheusBearerToken(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	token := randomHex(16)
	_, target := counterServer(t, 5, token)

	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	// Both at once: each waits about 5s for its first scrape.
	anon := Prometheus(t, target, 200*time.Millisecond)
	authed := PrometheusWith(t, PrometheusConfig{Target: target, Interval: 200 * time.Millisecond, BearerTokenFile: file})

	// Without the token the scrape is refused, and Targets says so.
	down, err := anon.WaitScraped(ctx)
	if err != nil || down.Health != "down" || !strings.Contains(down.LastError, "401") {
		t.Errorf("scraped without the token: %+v, %v; want down with a 401", down, err)
	}
	if v, ok, err := anon.Query(ctx, "observe_selftest_total"); err != nil || ok {
		t.Errorf("scraped without the token, Query = %v, %v, %v; want no sample", v, ok, err)
	}

	if v, err := authed.WaitFor(ctx, "observe_selftest_total", func(v float64) bool { return v == 5 }); err != nil {
		t.Fatalf("scraped with the token: %v, %v\n%s", v, err, authed.Output())
	}
	if up, err := authed.WaitScraped(ctx); err != nil || up.Health != "up" {
		t.Errorf("scraped with the token: %+v, %v; want up", up, err)
	}
}

func TestTail(t *testing.T) {
	var w tail
	line := bytes.Repeat([]byte("x"), 99)
	for i := range 1000 {
		fmt.Fprintf(&w, "%04d %s\n", i, line)
	}
	got := w.String()
	if len(got) > tailSize || !strings.HasSuffix(got, "0999 "+string(line)+"\n") {
		t.Fatalf("tail of %d bytes ends %q, want at most %d ending in line 0999", len(got), got[max(0, len(got)-120):], tailSize)
	}
	if !strings.HasPrefix(got, fmt.Sprintf("%04d ", 1000-len(got)/105)) {
		t.Errorf("tail starts %q, not at a whole line", got[:20])
	}
}

func TestJaegerMissing(t *testing.T) {
	t.Setenv("KAIRO_JAEGER", filepath.Join(t.TempDir(), "no-jaeger"))
	r := runFailing(t, func(tb testing.TB) { Jaeger(tb) })
	if !strings.Contains(r, "make testdata") || !strings.Contains(r, "no-jaeger") {
		t.Errorf("a missing Jaeger fails with %q; want the path and `make testdata`", r)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as the real one does, without failing the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// runFailing runs f in a goroutine of its own and returns what it failed
// with, "" if it did not.
func runFailing(t *testing.T, f func(testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}
