package abi

// PluginThrottled is the data of kairo.plugin.throttled: what one batch of
// a plugin asked past a cap the host holds every plugin to, and the host
// refused (call and publish returned [ErrnoBusy]) or cut (log lines dropped
// or shortened), reported once for the batch with the counts.
type PluginThrottled struct {
	Plugin string      `msgpack:"plugin"`
	Caps   []PluginCap `msgpack:"caps"`
}

// PluginCap is one cap a batch ran into: its name ("calls", "publishes",
// "log lines", "log bytes"), its limit per batch (per message for log
// bytes) and how many attempts went past it.
type PluginCap struct {
	Cap   string `msgpack:"cap"`
	Limit int    `msgpack:"limit"`
	Over  int    `msgpack:"over"`
}
