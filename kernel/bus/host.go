package bus

// Host is the name this bus sets on the events it publishes (Options.Host):
// "" on a store of one host.
func (b *Bus) Host() string { return b.opts.Host }
