package proc

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/internal/egress"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// A tree whose root's policy lists [net] hosts reaches them through an
// egress proxy of its own: a loopback listener on a port of its own, so
// that Landlock, which filters TCP connects by port, lets the tree reach
// that proxy and no other tree's, whose list may be wider. Landlock knows
// the port number only: a connect to that number at another address (a
// host on the network listening there) is not stopped by it. The proxy
// lives as long as the tree's root launch: its Cleanup, after the members
// have ended, closes it.
//
// What a proxy costs: a listening socket and two goroutines (the server
// and the refusal reporter) while idle; per connection, at most
// egressMaxConns at once, two or three goroutines and two of the kernel's
// descriptors (client and upstream), plus the runtime's splice pipes
// while a tunnel moves bytes; the plain-HTTP forwarder keeps up to 64
// idle upstream connections until they time out.

// egressMaxConns bounds one tree's connections through its proxy: a
// package manager opens a handful at once, and each costs the kernel two
// descriptors.
const egressMaxConns = 64

// egressTrees is the proxy of each tree that has one.
type egressTrees struct {
	mu     sync.Mutex
	byTree map[*Tree]*egress.Proxy
}

func (e *egressTrees) get(t *Tree) *egress.Proxy {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byTree[t]
}

func (e *egressTrees) set(t *Tree, p *egress.Proxy) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byTree == nil {
		e.byTree = map[*Tree]*egress.Proxy{}
	}
	e.byTree[t] = p
}

func (e *egressTrees) remove(t *Tree) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byTree, t)
}

// treeEgress points p, the policy of a spawn in tree, at the tree's
// egress proxy when p lists hosts. A root starts the tree's proxy, which
// serves connections of uid's sockets only, and only requests with the
// credentials of its URL, which the tree's environment holds; stop,
// non-nil then, closes it and is the root launch's to call. A member uses
// the proxy of its tree, whose list its own cannot widen; in a tree with
// none, its hosts are taken away: it reaches no host by name.
func (l *Sandboxed) treeEgress(tree *Tree, member bool, p *sandbox.Policy, uid int) (stop func(), err error) {
	if len(p.Hosts) == 0 {
		return nil, nil
	}
	if member {
		if px := l.egress.get(tree); px != nil {
			throughProxy(p, px)
		} else {
			p.Hosts = nil
		}
		return nil, nil
	}
	rules, err := manifests.ParseEgressRules(p.Hosts)
	if err != nil {
		return nil, err
	}
	cfg := egress.Config{
		Rules:    rules,
		MaxConns: egressMaxConns,
		PeerUID:  uid,
		// Each refusal is the tree's before the process reads its 403, so
		// it is published before the tree's exit; Deny coalesces them.
		ReportNow: true,
		OnDenied:  func(d egress.Denial) { tree.Deny(hostDenied(d, rules)) },
	}
	if l.egressConfig != nil {
		l.egressConfig(&cfg)
	}
	px, err := egress.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := px.Start(); err != nil {
		return nil, fmt.Errorf("the egress proxy for [net] hosts: %w", err)
	}
	l.egress.set(tree, px)
	throughProxy(p, px)
	return func() {
		l.egress.remove(tree)
		px.Close() // reports the refusals still pending
	}, nil
}

// throughProxy lets p connect to the proxy's port and points its HTTP
// clients at it. NO_PROXY is set empty: a name it exempted would be
// connected to directly, which Landlock refuses, so an exemption could
// only break a request, never widen the list; and an inherited one is
// dropped. Go clients go direct to loopback whatever NO_PROXY says, and
// are refused the same way.
func throughProxy(p *sandbox.Policy, px *egress.Proxy) {
	port := px.Addr().Port()
	if !slices.Contains(p.ConnectTCP, port) {
		p.ConnectTCP = append(slices.Clip(p.ConnectTCP), port) // not the manifest's array
	}
	p.Env = sandbox.MergeEnv(p.Env, px.Env())
}

// hostDenied is the kairo.sandbox.denied of a proxy's refusal. The grant
// that would allow it is named only for one plain host and port the list
// does not hold: a listed name refused for what it resolved to needs a
// different address or that address listed, which the operator writes,
// and a pattern ("*.com") is never granted by a re-run.
func hostDenied(d egress.Denial, rules *manifests.EgressRules) abi.SandboxDenied {
	object := d.Host
	if d.Port > 0 {
		object = net.JoinHostPort(d.Host, strconv.Itoa(d.Port))
	}
	out := abi.SandboxDenied{
		Op: abi.DeniedHost, Object: object, Detail: d.Reason, Count: d.Count, Reporter: "egress",
	}
	if d.Port > 0 && manifests.IsHostPort(object) && !rules.Allow(d.Host, d.Port) {
		out.Grant = fmt.Sprintf("[net] hosts = [%q]", object)
	}
	return out
}
