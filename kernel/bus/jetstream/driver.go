package jetstream

import (
	"fmt"
	"log/slog"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// init registers the JetStream store as [manifests.StoreJetStream] with
// [bus.Register]: a program that imports this package can open it with
// [bus.OpenStore], and links the NATS server for it.
func init() { bus.Register(manifests.StoreJetStream, opener{}) }

// opener opens the JetStream store that a daemon's kairo.toml describes.
type opener struct{}

// Open opens the store of the [store.jetstream] table (ConfigFor) and
// logs what the operator should know of it: a listen address other
// machines reach, settings the stream differs in, and how peers join.
func (opener) Open(cfg bus.OpenConfig) (bus.Store, error) {
	c, ok := cfg.Settings.(*manifests.Config)
	if !ok {
		return nil, fmt.Errorf("the JetStream store is opened from a *manifests.Config, not %T", cfg.Settings)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := c.Store.JetStream
	opts := ConfigFor(c, cfg.Home, log)
	if j.Listen != "" && j.AllowRemote && !manifests.Loopback(j.Listen) {
		log.Warn("the embedded JetStream server listens on an address other machines reach ([store.jetstream] allow_remote = true): its peers' passwords and the events cross the network in clear; a trusted network only", "listen", j.Listen, "peers", j.Peers)
	}
	s, err := Open(opts)
	if err != nil {
		return nil, fmt.Errorf("the JetStream store: %w", err)
	}
	// The stream is the operator's: a setting of kairo.toml it differs
	// in is reported, never applied behind their back.
	for _, d := range s.Drift() {
		log.Warn(d, "store", s.Describe())
	}
	for _, peer := range j.Peers {
		log.Info("a peer may join the embedded JetStream server: give it url, and a copy of its password file (mode 0600) as password_file", "peer", peer, "url", "nats://"+j.Listen, "password_file", PeerPasswordFile(opts.Dir, peer))
	}
	return s, nil
}

// ConfigFor is the store's configuration for a daemon whose data folder
// is home: [store.jetstream] of c, the host's name, and log for what the
// store reports while it opens.
func ConfigFor(c *manifests.Config, home string, log *slog.Logger) Config {
	j := c.Store.JetStream
	return Config{
		Embedded: j.Embedded, Dir: c.JetStreamPath(home), Listen: j.Listen, Peers: j.Peers, AllowRemote: j.AllowRemote, SyncAlways: c.Store.Synchronous == "full",
		URL: j.URL, CredsFile: j.Creds, NKeySeedFile: j.NKey, CAFile: j.CA, CertFile: j.Cert, KeyFile: j.Key, User: j.User, PasswordFile: j.PasswordPath(home),
		Stream: j.Stream, Host: c.HostName(), Replicas: j.Replicas, MaxAge: j.MaxAgeDuration(), MaxBytes: int64(j.MaxBytes),
		Timeout: j.TimeoutDuration(), ReconnectWait: j.ReconnectWaitDuration(), OpenTimeout: j.OpenTimeoutDuration(), Logger: log,
	}
}
