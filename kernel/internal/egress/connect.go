package egress

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// connect serves a CONNECT: check the rules, dial, answer 200 and splice
// the two connections until both sides are done or the tunnel idles.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, portStr, err := net.SplitHostPort(r.Host)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		refuse(w, http.StatusBadRequest, "CONNECT needs host:port, got "+strconv.Quote(r.Host))
		return
	}
	if !p.checkHost(w, host, port, r.Method) {
		return
	}
	up, err := p.dial(r.Context(), host, port)
	if err != nil {
		p.dialFailed(w, host, port, r.Method, err)
		return
	}
	if !p.track(up) {
		up.Close()
		refuse(w, http.StatusServiceUnavailable, "the proxy is shutting down")
		return
	}
	defer p.untrack(up)
	defer up.Close()

	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		refuse(w, http.StatusInternalServerError, "cannot take over the connection: "+err.Error())
		return
	}
	defer nc.Close()
	cc, ok := nc.(*clientConn)
	if !ok {
		return
	}

	// Bytes the client sent after its request (an eager ClientHello) are
	// already in the server's buffer; they go upstream first.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	cc.SetDeadline(time.Time{}) // the server's header deadline no longer applies
	if _, err := io.WriteString(cc.TCPConn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	p.tunnel(cc.TCPConn, up)
}

// dialFailed answers a failed dial: 403 and a Denial when the addresses
// were refused, 502 when the host could not be resolved or reached.
func (p *Proxy) dialFailed(w http.ResponseWriter, host string, port int, method string, err error) {
	var de *denyError
	if errors.As(err, &de) {
		p.deny(w, host, port, method, de.reason)
		return
	}
	refuse(w, http.StatusBadGateway, err.Error())
}

// chunk is how much a tunnel half moves per copy call; deadlines are
// renewed and progress recorded between chunks. A peer that reads less
// than a chunk per IdleTimeout while nothing else moves counts as idle.
const chunk = 256 << 10

// tunnel copies both ways until both halves are done. A half ends at EOF
// (it half-closes the other side's write end and the other half goes on),
// on an error (both connections close) or when the tunnel idles.
func (p *Proxy) tunnel(client, up *net.TCPConn) {
	t := &tunnelState{idle: p.cfg.IdleTimeout}
	t.touch()
	a := &half{t: t, src: client, dst: up}
	b := &half{t: t, src: up, dst: client}
	a.other, b.other = b, a
	p.handlers.Add(1) // the handler calling tunnel holds one already, so Wait cannot have returned
	done := make(chan struct{})
	go func() {
		defer p.handlers.Done()
		defer close(done)
		if a.run() != nil {
			client.Close()
			up.Close()
		}
	}()
	if b.run() != nil {
		client.Close()
		up.Close()
	}
	<-done
}

type tunnelState struct {
	idle time.Duration
	last atomic.Int64 // unix nanoseconds of the last byte moved either way
}

func (t *tunnelState) touch() { t.last.Store(time.Now().UnixNano()) }

func (t *tunnelState) quiet() time.Duration {
	return time.Since(time.Unix(0, t.last.Load()))
}

// half is one direction of a tunnel. Copying between two *net.TCPConn
// lets the runtime splice in the kernel; bytes in flight are not seen
// until a copy call returns, so a half that timed out with nothing moved
// wakes the other (a read deadline of now) and gives it a moment to
// report its bytes before it calls the tunnel idle. A half stuck writing
// to a peer that does not read is not woken by its read deadline; the
// other half's idle check closes both connections under it.
type half struct {
	t        *tunnelState
	src, dst *net.TCPConn
	other    *half
}

var errIdle = errors.New("tunnel idle")

func (h *half) run() error {
	suspect := false
	wait := h.t.idle
	for {
		h.src.SetReadDeadline(time.Now().Add(wait))
		n, err := io.CopyN(h.dst, h.src, chunk)
		if n > 0 {
			h.t.touch()
			suspect = false
		}
		switch {
		case err == nil:
			wait = h.t.idle
		case errors.Is(err, io.EOF):
			h.dst.CloseWrite()
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			if q := h.t.quiet(); q < h.t.idle {
				wait, suspect = h.t.idle-q, false
				continue
			}
			if suspect {
				return errIdle
			}
			suspect = true
			h.other.src.SetReadDeadline(time.Now())
			wait = min(time.Second, h.t.idle)
		default:
			return err
		}
	}
}
