package wasm

import "github.com/kairo-os/kairo/abi"

// Who writes what a plugin publishes. A plugin that turns one event into
// another — the terminal turns kairo.input.terminal into the user's
// message, a drop-in forwards what it hears — must not lend its own name
// to whoever wrote the event it was handed: a skill allowed to publish
// kairo.input.terminal would otherwise speak as the user through the
// terminal plugin, one hop away from the rule that skills never do.
//
// So an event a plugin publishes while it handles a batch is the
// plugin's own only when the operator vouches for every writer of that
// batch (abi.Vouched: the operator, the kernel, the daemon, the agent,
// plugins speaking for themselves). Otherwise its source names the
// batch's writer first, then the plugin ("skill/fetch via
// plugin/terminal"), and every consumer that tells principals by a
// source's prefix treats it as the writer's. The rule holds for every
// plugin, built in or dropped in, native or a module, because the host
// stamps the source at the publish import, not the plugin.
//
// The host hands a plugin the events of one writer at a time (take), so
// an operator's line is never in the batch of a skill's and is never
// counted as the skill's. A service call carries the writer of the batch
// that made it, so a chain of plugins keeps it.

// writerOf is the writer an event of a batch counts as, on the host
// named host: "" when the operator vouches for its source and it was
// written on this host, else its source (and the host it was written on,
// SOURCE@HOST, for another host's: even its operator is not this host's).
func writerOf(ev *abi.Event, host string) string {
	if ev.Host != host {
		src := ev.Source
		if src == "" {
			src = "unknown"
		}
		return src + "@" + ev.Host
	}
	if abi.Vouched(ev.Source) {
		return ""
	}
	return ev.Source
}

// batchWriter is the writer of b's events on the host named host: the
// first whose writer the operator does not vouch for, or "".
func batchWriter(b *abi.Batch, host string) string {
	for i := range b.Events {
		if w := writerOf(&b.Events[i], host); w != "" {
			return w
		}
	}
	return ""
}

// source is the source the publish import stamps on what p publishes
// while it handles a batch of writer.
func (p *Plugin) source() string {
	self := "plugin/" + p.opts.Name
	if p.writer == "" {
		return self
	}
	return abi.RelayedSource(p.writer, self)
}

// relayedBy reports whether source is of an event self relayed: a plugin
// does not get back what it published, whoever it names as the writer.
func relayedBy(source, self string) bool {
	_, via, ok := abi.Relayed(source)
	return ok && via == self
}
