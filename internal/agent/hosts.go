package agent

import (
	"github.com/kairo-os/kairo/abi"
)

// Several kairos may share one store (a JetStream cluster), each with its
// agent. An agent acts on its own host's events only — the messages sent
// to it, its processes, its approvals — since another host's process ids
// and run loops are that host's. It folds the other hosts' events into a
// state each, to list their run loops (agent.runs) and nothing more.

// maxOtherHosts bounds the other hosts whose run loops an agent keeps; the
// events of hosts past it are not folded (and said once).
const maxOtherHosts = 64

// foreign reports whether ev was published by another host: it names
// another than this one. The host an event names is the one whose subject
// of a shared store it was written on (the store skips an event that names
// another), so it is the cluster's word, not the writer's. An event
// without a host is of a host without a name: on a shared store, where
// every host has one, a writer on the log's bare subject, never this host.
func (r *Runtime) foreign(ev *abi.Event) bool {
	return ev.Host != r.k.Bus.Host()
}

// foldOther folds ev, another host's, into that host's state. The caller
// holds r.mu or is Start before the subscription.
func (r *Runtime) foldOther(ev *abi.Event) {
	st := r.others[ev.Host]
	if st == nil {
		if len(r.others) >= maxOtherHosts {
			if !r.othersFull {
				r.othersFull = true
				r.log.Warn("events of more hosts than an agent lists: their run loops are not listed", "max", maxOtherHosts, "host", ev.Host)
			}
			return
		}
		st = newState(r.cfg.Agent)
		r.others[ev.Host] = st
	}
	st.apply(ev)
}
