package console_test

// The bounds on connections that have not shown the token: real TCP
// connections against a real server over a real daemon's kernel, each
// refusal beside its control (the operator's connection goes on working).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/console"
	"github.com/kairo-os/kairo/manifests"
)

// gated starts a console of its own, with cfg's bounds, over a daemon whose
// own console is off.
func gated(t *testing.T, cfg console.Config) (*console.Server, *url.URL, *logBuffer) {
	t.Helper()
	d, _, _ := upConsole(t, func(c *manifests.Config) { c.Console.Listen = "" })
	logs := &logBuffer{}
	cfg.Listen, cfg.Home, cfg.Kernel = "127.0.0.1:0", t.TempDir(), d.Kernel()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	u, _ := url.Parse(s.URL())
	return s, u, logs
}

// dialFrom opens a TCP connection to u from the loopback address from.
func dialFrom(t *testing.T, u *url.URL, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", u.Host, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedBy reports whether the server has closed c: reading it ends with
// EOF (or a reset) within wait, after what the server answered, rather than
// timing out.
func closedBy(c net.Conn, wait time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// get sends a GET with the Bearer token on c, kept alive, and returns the
// answer's status.
func getOn(t *testing.T, c net.Conn, r *bufio.Reader, u *url.URL, path string) int {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", path, u.Host, token(u)); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	c.SetDeadline(time.Time{})
	return res.StatusCode
}

// waitStats polls s until ok holds of its stats, ten seconds at most.
func waitStats(t *testing.T, s *console.Server, what string, ok func(console.Stats) bool) console.Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.Stats()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the console counts %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Connections that send nothing, from one address and then from several,
// are held to the caps: the oldest are closed, the log and /api/status say
// so, and the operator's connections — one already in, one new — work.
func TestServerTokenlessCaps(t *testing.T) {
	t.Parallel()
	const perAddr, total = 4, 10
	s, u, logs := gated(t, console.Config{MaxTokenlessPerAddr: perAddr, MaxTokenless: total, HeaderTimeout: time.Minute})

	// The operator's connection, in before the flood.
	mine := dialFrom(t, u, "127.0.0.1")
	mineR := bufio.NewReader(mine)
	if code := getOn(t, mine, mineR, u, "/api/status"); code != http.StatusOK {
		t.Fatalf("the operator's first request: %d", code)
	}

	const flood = 40
	var conns []net.Conn
	for range flood {
		conns = append(conns, dialFrom(t, u, "127.0.0.1"))
	}
	waitStats(t, s, "after 40 connections from one address", func(st console.Stats) bool {
		return st.TokenlessClosed == flood-perAddr && st.TokenlessConnections == perAddr
	})
	for i, c := range conns {
		if closed, want := closedBy(c, 200*time.Millisecond), i < flood-perAddr; closed != want {
			t.Errorf("connection %d of %d without a token: closed %v, want %v (the oldest are closed, the %d newest kept)", i, flood, closed, want, perAddr)
		}
	}
	if !strings.Contains(logs.String(), "closed connections that had not shown its token") || !strings.Contains(logs.String(), fmt.Sprintf("%d from one address", perAddr)) {
		t.Errorf("the log does not report the cap per address:\n%s", logs)
	}

	// The control: the connection that showed the token is not counted nor
	// closed, and a new one gets in while the cap is full.
	if code := getOn(t, mine, mineR, u, "/api/status"); code != http.StatusOK {
		t.Errorf("the operator's kept connection after the flood: %d", code)
	}
	fresh := dialFrom(t, u, "127.0.0.1")
	if code := getOn(t, fresh, bufio.NewReader(fresh), u, "/api/plugins"); code != http.StatusOK {
		t.Errorf("a new connection with the token while the cap is full: %d", code)
	}

	// From several addresses: each within its own cap, all of them held to
	// the total.
	before := s.Stats()
	for _, from := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		for range perAddr {
			dialFrom(t, u, from)
		}
	}
	st := waitStats(t, s, "after 12 more from three addresses", func(st console.Stats) bool {
		return st.TokenlessConnections == total && st.TokenlessClosed == before.TokenlessClosed+uint64(before.TokenlessConnections+3*perAddr-total)
	})
	if st.TokenlessConnections > total {
		t.Errorf("%d tokenless connections open; the total cap is %d", st.TokenlessConnections, total)
	}

	// /api/status reports the count, through the operator's connection.
	res, body := do(t, u, "GET", "/api/status", "", bearer(u))
	var status struct {
		Console struct {
			TokenlessConnections int    `json:"tokenlessConnections"`
			TokenlessClosed      uint64 `json:"tokenlessClosed"`
		} `json:"console"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(body), &status); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("/api/status: %d %s (%v)", res.StatusCode, body, err)
	}
	if status.Version == "" || status.Console.TokenlessClosed < st.TokenlessClosed {
		t.Errorf("/api/status does not report the closed connections (%+v, the console counts %+v): %s", status.Console, s.Stats(), body)
	}
	if code := getOn(t, mine, mineR, u, "/api/status"); code != http.StatusOK {
		t.Errorf("the operator's kept connection at the end: %d", code)
	}
}

// A connection has HeaderTimeout from its accept to show the token, however
// it spends it: sending nothing, its headers a byte at a time, or the body
// of a request the server refused. One that showed it keeps its connection
// and its stream past that time.
func TestServerTokenlessTimeout(t *testing.T) {
	t.Parallel()
	const limit = 500 * time.Millisecond
	s, u, _ := gated(t, console.Config{HeaderTimeout: limit, Heartbeat: 100 * time.Millisecond})

	silent := dialFrom(t, u, "127.0.0.1")
	start := time.Now()
	if !closedBy(silent, 10*time.Second) || time.Since(start) > 5*time.Second {
		t.Errorf("a connection that sends nothing: not closed within 5s (%v)", time.Since(start))
	}

	slow := dialFrom(t, u, "127.0.0.1")
	start = time.Now()
	go func() { // ends when the server closes the connection, or the test's cleanup does
		for _, b := range []byte("GET /api/status HTTP/1.1\r\nHost: " + u.Host + "\r\nX-Pad: " + strings.Repeat("x", 200)) {
			if _, err := slow.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if !closedBy(slow, 10*time.Second) || time.Since(start) > 5*time.Second {
		t.Errorf("a connection that sends its headers a byte at a time: not closed within 5s (%v)", time.Since(start))
	}

	// Refused, with a body it never sends: the server would wait to read
	// it after its answer.
	body := dialFrom(t, u, "127.0.0.1")
	start = time.Now()
	fmt.Fprintf(body, "POST /api/send HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", u.Host)
	body.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(body), nil)
	if err != nil || res.StatusCode != http.StatusUnauthorized || !res.Close {
		t.Fatalf("a POST without a token: %v %v; want 401 and Connection: close", res, err)
	}
	if !closedBy(body, 10*time.Second) || time.Since(start) > 5*time.Second {
		t.Errorf("a refused POST whose body never comes: not closed within 5s (%v)", time.Since(start))
	}

	// The control: a connection with the token, and a stream, outlive the
	// limit.
	mine := dialFrom(t, u, "127.0.0.1")
	r := bufio.NewReader(mine)
	if code := getOn(t, mine, r, u, "/api/status"); code != http.StatusOK {
		t.Fatalf("the operator's request: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sres, _ := openStream(t, ctx, u, "", nil)
	if sres.StatusCode != http.StatusOK {
		t.Fatalf("the operator's stream: %d", sres.StatusCode)
	}
	var read atomic.Int64
	ended := make(chan error, 1)
	go func() { // ends when the stream does: the test cancels ctx at its end
		buf := make([]byte, 4096)
		for {
			n, err := sres.Body.Read(buf)
			read.Add(int64(n))
			if err != nil {
				ended <- err
				return
			}
		}
	}()
	time.Sleep(3 * limit)
	if code := getOn(t, mine, r, u, "/api/status"); code != http.StatusOK {
		t.Errorf("the operator's connection after %v: %d", 3*limit, code)
	}
	was := read.Load()
	select {
	case err := <-ended:
		t.Errorf("the operator's stream ended after %v: %v", 3*limit, err)
	case <-time.After(time.Second):
		if read.Load() == was {
			t.Errorf("the operator's stream went quiet after %v: no heartbeat in a second", 3*limit)
		}
	}
	if st := s.Stats(); st.TokenlessConnections != 0 {
		t.Errorf("after the timeouts the console still holds %d tokenless connections", st.TokenlessConnections)
	}
}
