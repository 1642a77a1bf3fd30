// Package egress is the loopback proxy through which a sandboxed process
// tree reaches the network by host name: only the hosts a manifest lists
// ([net] hosts = ["api.github.com:443", "*.pythonhosted.org"]).
//
// The proxy listens on 127.0.0.1 on a port the kernel picks and serves
// HTTP CONNECT tunnels (what HTTPS_PROXY makes clients use) and plain
// HTTP forward requests with an absolute URI (HTTP_PROXY). The sandbox is
// meant to allow one TCP connection, to that port, and no UDP, so the
// proxy resolves names itself and dials the address it resolved, never
// one the client chose: an IP literal passes only when it is listed as
// one. A redirect is not followed by the proxy; the client follows it
// with a new request that is checked like the first.
//
// Each refusal is a 403 whose body (and X-Kairo-Egress header) is one
// line the process can read, and a Denial given to Config.OnDenied,
// coalesced per host and port so a loop makes few reports with a count.
//
// # Which addresses the proxy dials
//
// Never the unspecified addresses (0.0.0.0, ::), multicast, broadcast
// or the proxy's own address: dialing those is a mistake or a loop, not
// a service. Loopback and link-local addresses (127.0.0.0/8, ::1,
// 169.254.0.0/16 with cloud metadata endpoints, fe80::/10) only for a
// listed IP literal, a "localhost" name, or with Config.AllowLocal: a
// listed public name whose DNS someone points at 127.0.0.1 must not open
// the host's own services to the tree. Private ranges (10/8, 192.168/16,
// …) are dialed: naming a host on the local network is a plain grant.
//
// # Bounds
//
// Client connections are capped (Config.MaxConns; past it a 503 with the
// reason), request headers are bounded in size and read time, tunnels and
// forwarded exchanges close after Config.IdleTimeout with no byte moved,
// and every copy uses a fixed buffer or the kernel's splice.
package egress
