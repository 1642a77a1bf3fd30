// Package egress is the loopback proxy through which a sandboxed process
// tree reaches the network by host name: only the hosts a manifest lists
// ([net] hosts = ["api.github.com:443", "*.pythonhosted.org"]), which
// [manifests.EgressRules] reads and matches; this package enforces them.
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
// # Whom the proxy serves
//
// One tree. Its URL carries a secret New makes,
// http://kairo:SECRET@127.0.0.1:PORT (see Proxy.URL and Env), and every
// request must carry it as Proxy-Authorization: Basic, which curl,
// Python's requests and Go's net/http send from HTTPS_PROXY on their own.
// A request without it gets a 407 and is no Denial: what another user
// asks for is never the tree's refusal, nor a re-run's grant. With
// Config.PeerUID the proxy also closes, as it accepts them, connections
// whose socket another uid owns (the kernel's sock_diag names the
// owner), so another user cannot even hold the tree's connection slots.
//
// A refused host that is not one plain host name or IP literal (a
// pattern such as "*.com") is refused like an unlisted one, and its
// Denial names no grant: [manifests.IsHostPort] is what a refusal may turn into.
//
// # Which addresses the proxy dials
//
// Never the unspecified addresses (0.0.0.0/8, ::), multicast, broadcast
// or the proxy's own address: dialing those is a mistake or a loop, not
// a service. The addresses that are not public — loopback (127/8, ::1),
// link-local (169.254/16 with cloud metadata endpoints, fe80::/10),
// private (10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10), shared
// (100.64/10, carrier-grade NAT), their NAT64 forms (64:ff9b::/96) and
// the machine's own addresses, public or not — only when the address is
// listed as such: a listed IP literal reaches its address, and a listed
// name reaches one of these addresses only when [net] hosts lists that
// address too, for that port (["nas.lan:443", "192.168.1.10:443"]). A
// "localhost" name reaches loopback. Config.AllowLocal lifts this, for
// tests. A listed public name whose DNS someone points at 127.0.0.1 or
// 10.0.0.1 must not open the host's or the network's services to the
// tree.
//
// # Bounds
//
// Client connections are capped (Config.MaxConns; past it a 503 with the
// reason), request headers are bounded in size and read time, tunnels and
// forwarded exchanges close after Config.IdleTimeout with no byte moved,
// and every copy uses a fixed buffer or the kernel's splice.
//
// Why a proxy of each tree's own, by host name:
// docs/RATIONALE.md#network-by-host-name-through-a-proxy-of-the-trees-own.
package egress
