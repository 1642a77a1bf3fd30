package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// JaegerVersion is the Jaeger release whose cmd/jaeger the tests run.
const JaegerVersion = "v1.76.0"

// jaegerReadyTimeout bounds a start; a cold start takes well under a
// second, a loaded machine running the whole suite much longer.
const jaegerReadyTimeout = 60 * time.Second

// ErrTraceNotFound is what [JaegerServer.Trace] returns while Jaeger holds
// no span of the trace: a caller polls until it is gone.
var ErrTraceNotFound = errors.New("jaeger: trace not found")

// JaegerPath is where [Jaeger] looks for the binary: $KAIRO_JAEGER (an
// absolute path), else the cache `make testdata` builds it into.
func JaegerPath() string {
	if p := os.Getenv("KAIRO_JAEGER"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.Getenv("HOME")
	}
	return filepath.Join(home, ".cache", "kairo", "jaeger-"+JaegerVersion)
}

// JaegerServer is a running Jaeger v2 all-in-one with memory storage,
// receiving OTLP on loopback and answering the query API. Its methods
// other than Stop and Restart may be called from any goroutine.
type JaegerServer struct {
	// OTLPHTTP is the OTLP/HTTP receiver's base URL, "http://127.0.0.1:PORT";
	// spans are posted to OTLPHTTP+"/v1/traces".
	OTLPHTTP string
	// OTLPGRPC is the OTLP/gRPC receiver's address, "127.0.0.1:PORT".
	OTLPGRPC string
	// Query is the query service's base URL, "http://127.0.0.1:PORT".
	Query string

	t      testing.TB
	bin    string
	config string
	client *http.Client

	mu   sync.Mutex
	proc *process // nil while stopped
}

// Jaeger starts Jaeger on free loopback ports and returns once its query
// API answers and its receivers accept connections. It is killed when the
// test ends. A missing binary fails the test with how to build it.
func Jaeger(t testing.TB) *JaegerServer {
	t.Helper()
	bin := findBinary(t, "the Jaeger "+JaegerVersion+" binary", JaegerPath(),
		"run `make testdata` in Kairo's root to build it into ~/.cache/kairo (once, about 10 minutes), or set KAIRO_JAEGER to a jaeger binary built from github.com/jaegertracing/jaeger@"+JaegerVersion+" ./cmd/jaeger")
	grpcPort, httpPort, queryPort, queryGRPCPort := freePort(t), freePort(t), freePort(t), freePort(t)
	config := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(config, []byte(jaegerConfig(grpcPort, httpPort, queryPort, queryGRPCPort)), 0o600); err != nil {
		t.Fatalf("observe: write Jaeger's config: %v", err)
	}
	j := &JaegerServer{
		OTLPHTTP: "http://" + hostPort(httpPort),
		OTLPGRPC: hostPort(grpcPort),
		Query:    "http://" + hostPort(queryPort),
		t:        t,
		bin:      bin,
		config:   config,
		client:   &http.Client{Timeout: 10 * time.Second},
	}
	t.Cleanup(j.Stop)
	j.start()
	return j
}

// jaegerConfig is a configuration with only what the tests use: the OTLP
// receiver, memory storage and the query service, each on the port given.
// The all-in-one's other listeners (Jaeger and Zipkin receivers, remote
// sampling, health check, expvar, zpages) are left out, its own metrics
// are off (they would listen on 8888) and so is the query service's
// tracing of itself (it would export to localhost:4317).
func jaegerConfig(grpcPort, httpPort, queryPort, queryGRPCPort int) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
    logs:
      level: info

extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, hostPort(queryPort), hostPort(queryGRPCPort), hostPort(grpcPort), hostPort(httpPort))
}

// start runs the binary and waits until it is ready, failing the test if
// it is not.
func (j *JaegerServer) start() {
	j.t.Helper()
	began := time.Now()
	p, err := start("jaeger", j.bin, "--config", j.config)
	if err != nil {
		j.t.Fatalf("observe: %v", err)
	}
	j.mu.Lock()
	j.proc = p
	j.mu.Unlock()
	if err := p.waitReady(jaegerReadyTimeout, j.ready); err != nil {
		j.Stop()
		j.t.Fatalf("observe: %v", err)
	}
	j.t.Logf("observe: Jaeger ready in %s (OTLP HTTP %s, OTLP gRPC %s, query %s)", time.Since(began).Round(time.Millisecond), j.OTLPHTTP, j.OTLPGRPC, j.Query)
}

// ready is nil once the query API answers and both receivers accept
// connections: the query service starts before the pipeline does.
func (j *JaegerServer) ready(ctx context.Context) error {
	if _, err := j.Services(ctx); err != nil {
		return err
	}
	if err := dialable(ctx, strings.TrimPrefix(j.OTLPHTTP, "http://")); err != nil {
		return err
	}
	return dialable(ctx, j.OTLPGRPC)
}

// Stop kills Jaeger and waits until it has exited; what it stored is lost.
// Stopping a stopped Jaeger does nothing.
func (j *JaegerServer) Stop() {
	j.mu.Lock()
	p := j.proc
	j.proc = nil
	j.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Restart stops Jaeger if it runs and starts it again on the same ports,
// with empty storage. Like Jaeger, it fails the test if Jaeger does not
// become ready, so it must be called from the test's goroutine.
func (j *JaegerServer) Restart() {
	j.t.Helper()
	j.Stop()
	j.start()
}

// Output is the tail of what Jaeger printed since it was last started.
func (j *JaegerServer) Output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.proc == nil {
		return ""
	}
	return j.proc.stderr.String()
}

// Trace is one trace as Jaeger's query API returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
	Warnings  []string           `json:"warnings"`
}

// Span is a span of a [Trace]. Its IDs are lowercase hex, a trace ID
// always 32 digits (Jaeger drops the leading zeros of a trace ID whose
// upper half is zero; the decoder puts them back).
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []Ref  `json:"references"`
	// StartTime is in microseconds since the Unix epoch, Duration in
	// microseconds.
	StartTime int64    `json:"startTime"`
	Duration  int64    `json:"duration"`
	Tags      []KV     `json:"tags"`
	Logs      []Log    `json:"logs"`
	ProcessID string   `json:"processID"`
	Warnings  []string `json:"warnings"`
}

// Ref is a reference from a span to another; RefType is "CHILD_OF" for
// the parent, "FOLLOWS_FROM" for a link.
type Ref struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KV is a tag. Type is Jaeger's name for the type of Value: "string",
// "bool", "int64" (Value a float64 after JSON), "float64", "binary".
type KV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Log is a span event: its time in microseconds since the epoch and its
// fields, the event's name under the key "event".
type Log struct {
	Timestamp int64 `json:"timestamp"`
	Fields    []KV  `json:"fields"`
}

// Process is the service a span came from and its resource attributes.
type Process struct {
	ServiceName string `json:"serviceName"`
	Tags        []KV   `json:"tags"`
}

// ParentSpanID is the span ID of the span's parent, "" for a root span.
func (s Span) ParentSpanID() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of the span's tag key and whether it has one.
func (s Span) Tag(key string) (any, bool) {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Span is the first span named operation, or nil.
func (tr *Trace) Span(operation string) *Span {
	for i := range tr.Spans {
		if tr.Spans[i].OperationName == operation {
			return &tr.Spans[i]
		}
	}
	return nil
}

// ServiceName is the service the span came from.
func (tr *Trace) ServiceName(s Span) string {
	return tr.Processes[s.ProcessID].ServiceName
}

// normalize puts back the leading zeros Jaeger drops from trace IDs.
func (tr *Trace) normalize() {
	tr.TraceID = fullTraceID(tr.TraceID)
	for i := range tr.Spans {
		s := &tr.Spans[i]
		s.TraceID = fullTraceID(s.TraceID)
		for k := range s.References {
			s.References[k].TraceID = fullTraceID(s.References[k].TraceID)
		}
	}
}

func fullTraceID(id string) string {
	if id != "" && len(id) < 32 {
		return strings.Repeat("0", 32-len(id)) + id
	}
	return id
}

// apiResponse is the envelope of Jaeger's query API.
type apiResponse[T any] struct {
	Data   T `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

// getAPI decodes the data of the query API's answer to path; a 404 is
// ErrTraceNotFound.
func getAPI[T any](ctx context.Context, j *JaegerServer, path string) (T, error) {
	var zero T
	status, body, err := get(ctx, j.client, j.Query+path)
	if err != nil {
		return zero, fmt.Errorf("jaeger query %s: %w", path, err)
	}
	if status == http.StatusNotFound {
		return zero, ErrTraceNotFound
	}
	if status != http.StatusOK {
		return zero, fmt.Errorf("jaeger query %s: status %d: %.500s", path, status, body)
	}
	var r apiResponse[T]
	if err := json.Unmarshal(body, &r); err != nil {
		return zero, fmt.Errorf("jaeger query %s: decode %.200q: %w", path, body, err)
	}
	if len(r.Errors) > 0 {
		return zero, fmt.Errorf("jaeger query %s: %d: %s", path, r.Errors[0].Code, r.Errors[0].Msg)
	}
	return r.Data, nil
}

// Trace fetches the trace whose ID is traceIDHex (GET /api/traces/{id}).
// It is ErrTraceNotFound while Jaeger holds none of its spans.
func (j *JaegerServer) Trace(ctx context.Context, traceIDHex string) (*Trace, error) {
	traces, err := getAPI[[]Trace](ctx, j, "/api/traces/"+url.PathEscape(strings.ToLower(traceIDHex)))
	if err != nil {
		return nil, err
	}
	if len(traces) == 0 {
		return nil, ErrTraceNotFound
	}
	tr := &traces[0]
	tr.normalize()
	return tr, nil
}

// WaitTrace polls [JaegerServer.Trace] until the trace is found and ready
// says it is complete (ready nil: found at all), or ctx ends; the error
// then says what was last seen.
func (j *JaegerServer) WaitTrace(ctx context.Context, traceIDHex string, ready func(*Trace) bool) (*Trace, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		tr, err := j.Trace(ctx, traceIDHex)
		if err == nil && (ready == nil || ready(tr)) {
			return tr, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				return tr, fmt.Errorf("trace %s has %d spans, not yet what was waited for: %w", traceIDHex, len(tr.Spans), ctx.Err())
			}
			return nil, fmt.Errorf("trace %s: %w (%w)", traceIDHex, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// Traces is up to limit traces of service from the last two days
// (GET /api/traces?service=...), newest first as Jaeger orders them.
func (j *JaegerServer) Traces(ctx context.Context, service string, limit int) ([]Trace, error) {
	q := url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}}
	traces, err := getAPI[[]Trace](ctx, j, "/api/traces?"+q.Encode())
	if errors.Is(err, ErrTraceNotFound) {
		return nil, nil
	}
	for i := range traces {
		traces[i].normalize()
	}
	return traces, err
}

// Services names the services Jaeger holds spans of (GET /api/services).
func (j *JaegerServer) Services(ctx context.Context) ([]string, error) {
	return getAPI[[]string](ctx, j, "/api/services")
}
