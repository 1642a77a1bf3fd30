package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// denyError is a refusal decided after the rules allowed the name: what
// the name resolved to is not an address the proxy dials. It becomes a
// 403 and a Denial, like a name not in the list.
type denyError struct{ reason string }

func (e *denyError) Error() string { return e.reason }

// upstreamError is a failure to resolve or reach an allowed host: a 502,
// not a denial, since the rules did not refuse anything.
type upstreamError struct{ err error }

func (e *upstreamError) Error() string { return e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// addrOK decides whether the proxy dials a resolved address. See the
// package doc, "Which addresses the proxy dials".
func (p *Proxy) addrOK(a netip.Addr, port int, host string, literal bool) bool {
	if a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false
	}
	if self := p.self; self.IsValid() && a == self.Addr() && port == int(self.Port()) {
		return false // the proxy itself: a loop that would eat its slots
	}
	if literal || p.cfg.AllowLocal || isLocalhost(host) {
		return true
	}
	return !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsLinkLocalMulticast()
}

func isLocalhost(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// dial resolves host (an IP literal stays as it is), drops the addresses
// the proxy does not dial and connects to the first that answers. The
// rules must already have allowed host and port.
func (p *Proxy) dial(ctx context.Context, host string, port int) (*net.TCPConn, error) {
	host = normalizeName(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	var addrs []netip.Addr
	literal := false
	if a, err := netip.ParseAddr(host); err == nil {
		addrs, literal = []netip.Addr{a.Unmap()}, true
	} else {
		rctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		addrs, err = p.cfg.Resolve(rctx, host)
		cancel()
		if err != nil {
			return nil, &upstreamError{fmt.Errorf("cannot resolve %s: %w", host, err)}
		}
	}
	var ok, refused []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if p.addrOK(a, port, host, literal) {
			ok = append(ok, a)
		} else {
			refused = append(refused, a)
		}
	}
	if len(ok) == 0 {
		if len(refused) == 0 {
			return nil, &upstreamError{fmt.Errorf("%s resolves to no address", host)}
		}
		return nil, &denyError{fmt.Sprintf("%s resolves only to addresses the proxy does not dial (%v)", host, refused)}
	}
	d := net.Dialer{Timeout: p.cfg.DialTimeout, KeepAlive: p.cfg.IdleTimeout / 2}
	var errs []error
	for _, a := range ok {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c.(*net.TCPConn), nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, &upstreamError{fmt.Errorf("cannot connect to %s port %d: %w", host, port, errors.Join(errs...))}
}
