package manifests

// This file holds the rules of a manifest's [net] hosts list: what a
// sandboxed tree may reach through the kernel's egress proxy, which
// enforces them.

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// EgressRules is the parsed [net] hosts list: the hosts a sandboxed tree
// may reach. The zero value and a nil *EgressRules allow nothing. An
// EgressRules is immutable once parsed and safe for concurrent use.
type EgressRules struct {
	names    map[string]ports     // exact names
	suffixes map[string]ports     // "*.suffix" entries, keyed by "suffix"
	addrs    map[netip.Addr]ports // IP literals, unmapped
}

// ports is the set of ports the entries for one host allow. While an
// entry is parsed, nil means "no port given"; merge spells that out as 80
// and 443, so a stored set is never nil.
type ports []uint16

func (ps ports) has(port int) bool {
	for _, p := range ps {
		if int(p) == port {
			return true
		}
	}
	return false
}

// merge adds the ports of an entry; nil (80 and 443) is spelled out so a
// later explicit port does not lose the default pair.
func (ps ports) merge(add ports) ports {
	if add == nil {
		add = ports{80, 443}
	}
	if ps == nil {
		ps = ports{}
	}
	for _, p := range add {
		if !ps.has(int(p)) {
			ps = append(ps, p)
		}
	}
	return ps
}

// ParseEgressRules parses a manifest's [net] hosts list. Each entry is a host
// name ("api.github.com"), a wildcard ("*.pythonhosted.org": one or more
// labels before the suffix, never the suffix itself) or an IP literal
// ("127.0.0.1", "[::1]"), with an optional ":port". Without a port an
// entry allows ports 80 and 443. Names are compared case-insensitively
// with a trailing dot stripped; internationalized names must be written
// in their ASCII (punycode, "xn--") form and are compared as written.
// The error of an invalid entry names it and says what is allowed.
func ParseEgressRules(list []string) (*EgressRules, error) {
	r := newEgressRules()
	for _, entry := range list {
		if err := r.add(entry); err != nil {
			return nil, fmt.Errorf("egress: [net] hosts entry %q: %w; %s", entry, err, entryHelp)
		}
	}
	return r, nil
}

// entryHelp says what a [net] hosts entry is, for errors.
const entryHelp = "an entry is a host name, *.suffix or an IP literal, with an optional :port (1-65535)"

func newEgressRules() *EgressRules {
	return &EgressRules{
		names:    map[string]ports{},
		suffixes: map[string]ports{},
		addrs:    map[netip.Addr]ports{},
	}
}

// CheckEgressEntry checks one [net] hosts entry as [ParseEgressRules]
// reads it, for a manifest's check, which names the file, line and key
// itself: the error names the entry, what is wrong with it and what an
// entry is.
func CheckEgressEntry(entry string) error {
	if err := newEgressRules().add(entry); err != nil {
		return fmt.Errorf("%q: %w; %s", entry, err, entryHelp)
	}
	return nil
}

// Covers reports whether r allows everything entry allows: every port of
// a name or IP literal, and for "*.suffix" a wildcard entry of r for that
// suffix or one of its parents. An invalid entry is covered by nothing.
// It is how a child's list is cut to what its spawner's list holds too.
func (r *EgressRules) Covers(entry string) bool {
	e := newEgressRules()
	if r == nil || e.add(entry) != nil {
		return false
	}
	for name, ps := range e.names {
		for _, p := range ps {
			if !r.Allow(name, int(p)) {
				return false
			}
		}
	}
	for a, ps := range e.addrs {
		for _, p := range ps {
			if !r.addrs[a].has(int(p)) {
				return false
			}
		}
	}
	for suffix, ps := range e.suffixes {
		for _, p := range ps {
			if !r.coversSuffix(suffix, int(p)) {
				return false
			}
		}
	}
	return true
}

// coversSuffix reports whether a wildcard of r matches every name under
// suffix on port: "*.suffix" itself or "*.parent" of it.
func (r *EgressRules) coversSuffix(suffix string, port int) bool {
	for s := suffix; ; {
		if ps, ok := r.suffixes[s]; ok && ps.has(port) {
			return true
		}
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return false
		}
		s = s[i+1:]
	}
}

func (r *EgressRules) add(entry string) error {
	s := strings.TrimSpace(entry)
	if s == "" {
		return fmt.Errorf("empty entry")
	}
	if strings.ContainsAny(s, "/@?#") {
		return fmt.Errorf("a host, not a URL: no scheme, user, path or query")
	}
	host, ps, err := splitEntry(s)
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("an IP address with a zone (%%%s) is not allowed", a.Zone())
		}
		a = a.Unmap()
		r.addrs[a] = r.addrs[a].merge(ps)
		return nil
	}
	host = normalizeName(host)
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if err := checkName(rest); err != nil {
			return fmt.Errorf("wildcard suffix: %w", err)
		}
		r.suffixes[rest] = r.suffixes[rest].merge(ps)
		return nil
	}
	if err := checkName(host); err != nil {
		return err
	}
	r.names[host] = r.names[host].merge(ps)
	return nil
}

// splitEntry separates an entry's host from its optional port. A bare
// IPv6 literal ("::1") has no port; one with a port is bracketed.
func splitEntry(s string) (string, ports, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", nil, fmt.Errorf("missing ] after an IPv6 literal")
		}
		host, rest := s[1:end], s[end+1:]
		if _, err := netip.ParseAddr(host); err != nil {
			return "", nil, fmt.Errorf("%q in brackets is not an IPv6 address", host)
		}
		if rest == "" {
			return host, nil, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", nil, fmt.Errorf("unexpected %q after the IPv6 literal", rest)
		}
		port, err := parsePort(p)
		return host, ports{port}, err
	}
	if strings.Count(s, ":") > 1 {
		if _, err := netip.ParseAddr(s); err != nil {
			return "", nil, fmt.Errorf("more than one colon; an IPv6 literal with a port is written [addr]:port")
		}
		return s, nil, nil
	}
	host, p, found := strings.Cut(s, ":")
	if !found {
		return host, nil, nil
	}
	port, err := parsePort(p)
	return host, ports{port}, err
}

func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return uint16(n), nil
}

// normalizeName lowercases a host name and strips one trailing dot.
func normalizeName(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// NormalHost is the form under which [EgressRules] compare host: without
// the brackets of an IPv6 literal, lowercased, one trailing dot stripped,
// so EXAMPLE.com. and example.com are one host.
func NormalHost(host string) string {
	return normalizeName(unbracket(host))
}

// unbracket drops the brackets around an IPv6 literal.
func unbracket(host string) string {
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// checkName accepts an ASCII DNS name: labels of letters, digits, '-' and
// '_' (service names use it), 1 to 63 bytes each, 253 in all, not starting
// or ending with '-', and a last label that is not all digits (that would
// read as an IPv4 address).
func checkName(h string) error {
	if h == "" {
		return fmt.Errorf("empty host name")
	}
	if len(h) > 253 {
		return fmt.Errorf("host name longer than 253 bytes")
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" {
			return fmt.Errorf("empty label in %q", h)
		}
		if len(l) > 63 {
			return fmt.Errorf("label %q longer than 63 bytes", l)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c == '*':
				return fmt.Errorf("'*' is allowed only as the whole first label (*.suffix)")
			case c >= 0x80:
				return fmt.Errorf("non-ASCII name; write it in punycode (xn--...)")
			default:
				return fmt.Errorf("character %q is not allowed in a host name", c)
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("%q looks like an IP address but is not one", h)
	}
	return nil
}

// Allow reports whether the rules let a tree reach host on port. Host is
// a name or an IP literal (brackets allowed); an IP literal matches only
// an IP literal entry, never a name that resolves to it, and a name never
// matches by its addresses. A wildcard matches names with one or more
// labels before its suffix.
func (r *EgressRules) Allow(host string, port int) bool {
	if r == nil || port < 1 || port > 65535 {
		return false
	}
	host = unbracket(host)
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return false
		}
		return r.addrs[a.Unmap()].has(port)
	}
	host = normalizeName(host)
	if checkName(host) != nil {
		return false
	}
	if ps, ok := r.names[host]; ok && ps.has(port) {
		return true
	}
	for i := 0; i < len(host); i++ {
		if host[i] == '.' {
			if ps, ok := r.suffixes[host[i+1:]]; ok && ps.has(port) {
				return true
			}
		}
	}
	return false
}

// ListsAddr reports whether an IP literal entry lists a on port.
func (r *EgressRules) ListsAddr(a netip.Addr, port int) bool {
	return r != nil && r.addrs[a.Unmap()].has(port)
}

// IsPlainHost reports whether host names one host exactly, as a [net]
// hosts entry without a wildcard would: a host name, or an IP literal
// without a zone (brackets allowed). A pattern ("*.com") or anything
// else a client sends is not one: it is refused, and never becomes a
// grant.
func IsPlainHost(host string) bool {
	host = unbracket(host)
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Zone() == ""
	}
	return checkName(normalizeName(host)) == nil
}

// IsHostPort reports whether s is exactly one host and one port,
// "host:port" or "[v6]:port", with a host [IsPlainHost] accepts: what a
// refusal may turn into a grant. A wildcard, a missing port or anything
// else is not.
func IsHostPort(s string) bool {
	host, p, err := net.SplitHostPort(s)
	if err != nil || !IsPlainHost(host) {
		return false
	}
	_, err = parsePort(p)
	return err == nil
}
