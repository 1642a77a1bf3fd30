package egress

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// BenchmarkEgressProxy downloads 64 MiB over HTTPS from a loopback server,
// directly and through a CONNECT tunnel of the proxy, alternating which
// goes first, and reports throughput through the proxy over direct.
func BenchmarkEgressProxy(b *testing.B) {
	const size = 64 << 20
	payload := bytes.Repeat([]byte("kairo egress benchmark payload.\n"), size/32)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		w.Write(payload)
	}))
	defer srv.Close()
	p, _ := startProxy(b, Config{}, "api.example.com:"+port(srv))

	direct := srv.Client().Transport.(*http.Transport).Clone()
	direct.DisableKeepAlives = true
	proxied := client(srv, p).Transport.(*http.Transport)
	proxied.DisableKeepAlives = true
	// The direct client dials the server's address; the proxied one asks
	// the proxy for the listed name, which it resolves to the same.
	directURL := srv.URL + "/"
	proxiedURL := "https://api.example.com:" + port(srv) + "/"

	fetch := func(tr *http.Transport, u string) time.Duration {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != size {
			b.Fatalf("read %d of %d: %v", n, size, err)
		}
		return time.Since(start)
	}
	fetch(direct, directURL) // warm up both paths
	fetch(proxied, proxiedURL)

	var tDirect, tProxied time.Duration
	b.SetBytes(2 * size) // one download each way per op
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tDirect += fetch(direct, directURL)
			tProxied += fetch(proxied, proxiedURL)
		} else {
			tProxied += fetch(proxied, proxiedURL)
			tDirect += fetch(direct, directURL)
		}
	}
	b.StopTimer()
	mb := float64(size) * float64(b.N) / 1e6
	b.ReportMetric(mb/tDirect.Seconds(), "direct-MB/s")
	b.ReportMetric(mb/tProxied.Seconds(), "proxy-MB/s")
	b.ReportMetric(tDirect.Seconds()/tProxied.Seconds(), "ratio")
}
