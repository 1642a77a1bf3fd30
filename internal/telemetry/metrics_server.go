package telemetry

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kairo-os/kairo/manifests"
)

// The endpoint's bounds: a scrape is small and Prometheus sends one at a
// time, so more at once, or a slow one, is someone else.
const (
	maxScrapes    = 4
	scrapeTimeout = 10 * time.Second
)

// Serve listens on listen, HOST:PORT as [telemetry] metrics_listen gives
// it (port 0 picks a free one), and serves GET and HEAD /metrics until
// Close; every other path is 404. A non-loopback address is refused unless
// allowRemote. It returns once the listener is open.
func (m *Metrics) Serve(listen string, allowRemote bool) error {
	if !manifests.Loopback(listen) && !allowRemote {
		return fmt.Errorf("[telemetry] metrics_listen %q is not a loopback address: listen on 127.0.0.1, or set [telemetry] allow_remote = true to mean it", listen)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("the metrics endpoint cannot listen on %s ([telemetry] metrics_listen): %w; choose another port, or 0 for a free one", listen, err)
	}
	errLog := slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)
	scrape := promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog: errLog, Registry: m.reg, MaxRequestsInFlight: maxScrapes, Timeout: scrapeTimeout,
	}))
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path != "/metrics":
				http.NotFound(w, r)
			case r.Method != http.MethodGet && r.Method != http.MethodHead:
				w.Header().Set("Allow", "GET, HEAD")
				http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
			default:
				scrape.ServeHTTP(w, r)
			}
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      scrapeTimeout + 5*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	m.mu.Lock()
	if m.srv != nil || m.closed {
		m.mu.Unlock()
		ln.Close()
		return errors.New("telemetry: the metrics endpoint serves already, or was closed")
	}
	m.srv, m.ln, m.served = srv, ln, served
	m.mu.Unlock()
	go func() { // owned by m: ends with Close
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		served <- err
	}()
	if !manifests.Loopback(listen) {
		m.log.Warn("the metrics endpoint listens on an address other machines may reach ([telemetry] allow_remote = true): anyone who reaches it reads the daemon's health", "listen", ln.Addr().String())
	}
	return nil
}

// Addr is the address the endpoint listens on; nil before Serve.
func (m *Metrics) Addr() net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ln == nil {
		return nil
	}
	return m.ln.Addr()
}
