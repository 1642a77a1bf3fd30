package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/manifests"
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

// addrOK decides whether the proxy dials a resolved address, and if not
// why. See the package doc, "Which addresses the proxy dials".
func (p *Proxy) addrOK(a netip.Addr, port int, host string, literal bool) (bool, string) {
	if never := neverDialed(a); never != "" {
		return false, never
	}
	if self := p.self; self.IsValid() && a == self.Addr() && port == int(self.Port()) {
		return false, "the proxy itself" // a loop that would eat its slots
	}
	if literal || p.cfg.AllowLocal {
		return true, ""
	}
	kind := localKind(a)
	if kind == "" && p.locals.has(a) {
		kind = "this machine's"
	}
	switch {
	case kind == "":
		return true, ""
	case kind == "loopback" && isLocalhost(host):
		return true, ""
	case p.cfg.Rules.ListsAddr(a, port):
		return true, "" // the address is listed as such
	}
	return false, kind
}

// neverDialed names what a is when the proxy never dials it: a mistake
// or a loop, not a service.
func neverDialed(a netip.Addr) string {
	switch {
	case a.IsUnspecified(), a.Is4() && a.As4()[0] == 0:
		return "unspecified"
	case a.IsMulticast():
		return "multicast"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	return ""
}

// Address ranges that are not public besides Go's loopback, link-local
// and private (RFC 1918, fc00::/7) tests.
var (
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598, carrier-grade NAT
	siteLocal   = netip.MustParsePrefix("fec0::/10")     // deprecated, still routed somewhere
	nat64       = netip.MustParsePrefix("64:ff9b::/96")  // RFC 6052: an IPv4 address behind a NAT64
)

// localKind names the kind of a non-public address ("loopback",
// "link-local", "private", "shared (CGNAT)"), "" for a public one. A
// NAT64 address is the kind of the IPv4 address it embeds.
func localKind(a netip.Addr) string {
	if nat64.Contains(a) {
		b := a.As16()
		return localKind(netip.AddrFrom4([4]byte(b[12:])))
	}
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsPrivate(), siteLocal.Contains(a):
		return "private"
	case sharedSpace.Contains(a):
		return "shared (CGNAT)"
	}
	return ""
}

func isLocalhost(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// localAddrs is the machine's own addresses, listed again when the last
// list is older than a second: a public address of the machine's reaches
// its services bound to 0.0.0.0 as loopback would.
type localAddrs struct {
	mu    sync.Mutex
	at    time.Time
	addrs map[netip.Addr]bool
}

func (l *localAddrs) has(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.at) > time.Second {
		l.at = time.Now()
		l.addrs = map[netip.Addr]bool{}
		if list, err := net.InterfaceAddrs(); err == nil {
			for _, x := range list {
				if n, ok := x.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(n.IP); ok {
						l.addrs[ip.Unmap()] = true
					}
				}
			}
		}
	}
	return l.addrs[a]
}

// dial resolves host (an IP literal stays as it is), drops the addresses
// the proxy does not dial and connects to the first that answers. The
// rules must already have allowed host and port.
func (p *Proxy) dial(ctx context.Context, host string, port int) (*net.TCPConn, error) {
	host = manifests.NormalHost(host)
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
	var ok []netip.Addr
	var refused []string
	for _, a := range addrs {
		a = a.Unmap()
		if good, kind := p.addrOK(a, port, host, literal); good {
			ok = append(ok, a)
		} else {
			refused = append(refused, a.String()+": "+kind)
		}
	}
	if len(ok) == 0 {
		if len(refused) == 0 {
			return nil, &upstreamError{fmt.Errorf("%s resolves to no address", host)}
		}
		reason := fmt.Sprintf("%s resolves only to addresses the proxy does not dial (%s)", host, strings.Join(refused, ", "))
		if !literal {
			reason += "; a name reaches a private, loopback, link-local or this machine's address only when [net] hosts lists that address too"
		}
		return nil, &denyError{reason}
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
