package observe

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Sink is an OTLP/HTTP receiver that takes every export and keeps only
// counts: the trace receiver of a benchmark, where Jaeger's own work would
// be measured with Kairo's.
type Sink struct {
	// URL is its base URL, for [telemetry] otlp_endpoint.
	URL      string
	requests atomic.Int64
	bytes    atomic.Int64
}

// NewSink starts a sink, stopped when the test ends.
func NewSink(t testing.TB) *Sink {
	s := &Sink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		s.bytes.Add(n)
		// An empty ExportTraceServiceResponse: every span accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Requests counts the exports taken.
func (s *Sink) Requests() int64 { return s.requests.Load() }

// Bytes counts the bytes of the exports' bodies.
func (s *Sink) Bytes() int64 { return s.bytes.Load() }
