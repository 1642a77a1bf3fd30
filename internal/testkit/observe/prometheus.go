package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// PrometheusPath is the binary [Prometheus] runs: Debian's package.
const PrometheusPath = "/usr/bin/prometheus"

// prometheusReadyTimeout bounds a start: Prometheus replays its (empty)
// write-ahead log and opens its storage before it says it is ready.
const prometheusReadyTimeout = 60 * time.Second

// PrometheusConfig says what [PrometheusWith] scrapes and how.
type PrometheusConfig struct {
	// Target is the host:port whose /metrics is scraped, over plain HTTP.
	Target string
	// Interval is the scrape interval, also the scrape timeout; zero
	// means one second.
	Interval time.Duration
	// BearerTokenFile, when set, is a file whose content Prometheus sends
	// in "Authorization: Bearer" with each scrape.
	BearerTokenFile string
}

// PrometheusServer is a running Prometheus scraping one target, with its
// storage in the test's temporary folder. Its methods may be called from
// any goroutine.
type PrometheusServer struct {
	// URL is its HTTP API's base URL, "http://127.0.0.1:PORT".
	URL string

	interval time.Duration
	client   *http.Client
	proc     *process
}

// Prometheus starts Prometheus scraping target (host:port, path /metrics)
// every interval and returns once it is ready; it is killed when the test
// ends. A missing binary fails the test with how to install it.
//
// The first scrape comes about 5 seconds after the start: Prometheus's
// service discovery hands its targets on at most every 5 seconds, which
// no flag changes. [PrometheusServer.WaitFor] and
// [PrometheusServer.WaitScraped] wait that out.
func Prometheus(t testing.TB, target string, interval time.Duration) *PrometheusServer {
	t.Helper()
	return PrometheusWith(t, PrometheusConfig{Target: target, Interval: interval})
}

// PrometheusWith is [Prometheus] with the whole configuration, such as a
// bearer token to scrape with.
func PrometheusWith(t testing.TB, c PrometheusConfig) *PrometheusServer {
	t.Helper()
	bin := findBinary(t, "Prometheus", PrometheusPath, "install Debian's package with `sudo apt-get install prometheus`")
	if c.Target == "" {
		t.Fatalf("observe: PrometheusConfig.Target is empty: name the host:port to scrape")
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(prometheusConfig(c)), 0o600); err != nil {
		t.Fatalf("observe: write Prometheus's config: %v", err)
	}
	listen := hostPort(freePort(t))
	began := time.Now()
	p, err := start("prometheus", bin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen,
		"--log.level=warn")
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	t.Cleanup(p.kill)
	s := &PrometheusServer{URL: "http://" + listen, interval: c.Interval, client: &http.Client{Timeout: 10 * time.Second}, proc: p}
	if err := p.waitReady(prometheusReadyTimeout, s.ready); err != nil {
		t.Fatalf("observe: %v", err)
	}
	t.Logf("observe: Prometheus ready in %s (%s, scraping %s every %s)", time.Since(began).Round(time.Millisecond), s.URL, c.Target, c.Interval)
	return s
}

// prometheusConfig scrapes c.Target's /metrics as the job "target".
func prometheusConfig(c PrometheusConfig) string {
	interval := fmt.Sprintf("%dms", c.Interval.Milliseconds())
	auth := ""
	if c.BearerTokenFile != "" {
		auth = fmt.Sprintf("    authorization:\n      type: Bearer\n      credentials_file: %q\n", c.BearerTokenFile)
	}
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: target
    metrics_path: /metrics
    scheme: http
%[2]s    static_configs:
      - targets: [%[3]q]
`, interval, auth, c.Target)
}

func (s *PrometheusServer) ready(ctx context.Context) error {
	status, _, err := get(ctx, s.client, s.URL+"/-/ready")
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET /-/ready: status %d", status)
	}
	return err
}

// Output is the tail of what Prometheus printed (warnings and errors).
func (s *PrometheusServer) Output() string { return s.proc.stderr.String() }

// api decodes the "data" of the API's answer to path into out.
func (s *PrometheusServer) api(ctx context.Context, path string, out any) error {
	status, body, err := get(ctx, s.client, s.URL+path)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("prometheus %s: status %d: decode %.200q: %w", path, status, body, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("prometheus %s: status %d: %s", path, status, r.Error)
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		return fmt.Errorf("prometheus %s: decode data %.200q: %w", path, r.Data, err)
	}
	return nil
}

// Query evaluates promql now (GET /api/v1/query) and returns the value of
// its first sample, or of the scalar it is; ok is false when the result
// is empty (nothing scraped matches yet).
func (s *PrometheusServer) Query(ctx context.Context, promql string) (v float64, ok bool, err error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.api(ctx, "/api/v1/query?"+url.Values{"query": {promql}}.Encode(), &data); err != nil {
		return 0, false, err
	}
	// A sample's value is [unix seconds, "value as a string"].
	var sample [2]any
	switch data.ResultType {
	case "vector":
		var vec []struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &vec); err != nil {
			return 0, false, fmt.Errorf("prometheus query %q: decode the vector: %w", promql, err)
		}
		if len(vec) == 0 {
			return 0, false, nil
		}
		sample = vec[0].Value
	case "scalar":
		if err := json.Unmarshal(data.Result, &sample); err != nil {
			return 0, false, fmt.Errorf("prometheus query %q: decode the scalar: %w", promql, err)
		}
	default:
		return 0, false, fmt.Errorf("prometheus query %q: a %s result, not a vector or scalar", promql, data.ResultType)
	}
	str, _ := sample[1].(string)
	v, err = strconv.ParseFloat(str, 64)
	if err != nil {
		return 0, false, fmt.Errorf("prometheus query %q: the value %v: %w", promql, sample[1], err)
	}
	return v, true, nil
}

// WaitFor polls [PrometheusServer.Query] until promql has a value cond
// accepts, and returns it; when ctx ends first, the error says what was
// last seen.
func (s *PrometheusServer) WaitFor(ctx context.Context, promql string, cond func(float64) bool) (float64, error) {
	tick := time.NewTicker(max(s.interval/4, 50*time.Millisecond))
	defer tick.Stop()
	for {
		v, ok, err := s.Query(ctx, promql)
		if err == nil && ok && cond(v) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			switch {
			case err != nil:
				return 0, fmt.Errorf("wait for %q: %w (%w)", promql, err, ctx.Err())
			case !ok:
				return 0, fmt.Errorf("wait for %q: still no sample: %w", promql, ctx.Err())
			default:
				return v, fmt.Errorf("wait for %q: last value %v: %w", promql, v, ctx.Err())
			}
		case <-tick.C:
		}
	}
}

// Target is the scrape state of a target, from /api/v1/targets.
type Target struct {
	ScrapeURL string `json:"scrapeUrl"`
	// Health is "up", "down", or "unknown" before the first scrape.
	Health     string    `json:"health"`
	LastError  string    `json:"lastError"`
	LastScrape time.Time `json:"lastScrape"`
}

// Targets is the state of every target Prometheus scrapes.
func (s *PrometheusServer) Targets(ctx context.Context) ([]Target, error) {
	var data struct {
		ActiveTargets []Target `json:"activeTargets"`
	}
	if err := s.api(ctx, "/api/v1/targets?state=active", &data); err != nil {
		return nil, err
	}
	return data.ActiveTargets, nil
}

// WaitScraped polls [PrometheusServer.Targets] until the target has been
// scraped at least once, up or down, and returns its state.
func (s *PrometheusServer) WaitScraped(ctx context.Context) (Target, error) {
	tick := time.NewTicker(max(s.interval/4, 50*time.Millisecond))
	defer tick.Stop()
	for {
		ts, err := s.Targets(ctx)
		if err == nil && len(ts) > 0 && ts[0].Health != "unknown" && !ts[0].LastScrape.IsZero() {
			return ts[0], nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return Target{}, fmt.Errorf("wait for a scrape: %w (%w)", err, ctx.Err())
			}
			return Target{}, fmt.Errorf("wait for a scrape: not scraped yet: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
