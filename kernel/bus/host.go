package bus

// Host is the name this bus sets on the events it publishes ([Config.Host]):
// "" on a store of one host.
func (b *Bus) Host() string { return b.opts.Host }
