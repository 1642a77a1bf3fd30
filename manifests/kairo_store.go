package manifests

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StoreConfig is the [store] table.
type StoreConfig struct {
	Kind        string `toml:"kind"`        // "sqlite", "memory" or "jetstream"
	Path        string `toml:"path"`        // SQLite file, relative to KAIRO_HOME
	Synchronous string `toml:"synchronous"` // "normal" or "full"
	WALMax      Size   `toml:"wal_max"`     // bound of the SQLite write-ahead log
	RingSize    int    `toml:"ring_size"`   // events the memory store holds
	// JetStream is [store.jetstream], for kind "jetstream".
	JetStream JetStreamConfig `toml:"jetstream"`
}

// JetStreamConfig is [store.jetstream]: the bus on NATS JetStream, either
// a server Kairo starts in its own process (Embedded) or an existing
// cluster (URL and its credentials).
type JetStreamConfig struct {
	// Embedded starts a nats-server with JetStream inside kairo, storing
	// under Dir (relative to KAIRO_HOME; default "jetstream"): one host, no
	// extra process.
	Embedded bool   `toml:"embedded"`
	Dir      string `toml:"dir"`
	// Listen, with Embedded, serves the stream to the hosts of Peers on
	// this address (HOST:PORT): a loopback address unless AllowRemote.
	// Each peer logs in with a password made at the first start, in
	// JETSTREAM_DIR/peers/NAME.password, and may append only as itself
	// (jetstream.HostPermissions in kernel/bus/jetstream).
	Listen      string   `toml:"listen"`
	Peers       []string `toml:"peers"`
	AllowRemote bool     `toml:"allow_remote"`
	// URL is the cluster's ("nats://host:4222", several separated by
	// commas); with it, Creds (a credentials file), NKey (an nkey seed
	// file), and TLS's CA, Cert and Key files, as the cluster asks.
	URL   string `toml:"url"`
	Creds string `toml:"creds"`
	NKey  string `toml:"nkey"`
	CA    string `toml:"ca"`
	Cert  string `toml:"cert"`
	Key   string `toml:"key"`
	// User and PasswordFile (relative to KAIRO_HOME) log in to the
	// server at URL with a password, as a peer of another host's embedded
	// server does; User defaults to this host's name.
	User         string `toml:"user"`
	PasswordFile string `toml:"password_file"`
	// OpenTimeout is how long kairo up tries to reach the server and find
	// or create the stream while the cluster is not ready ("60s", the
	// default).
	OpenTimeout string `toml:"open_timeout"`
	// Stream is the stream's name (default "KAIRO"); Replicas its copies
	// in a cluster (default 1); MaxAge ("720h") and MaxBytes ("10GiB")
	// bound what it keeps (default: no bound).
	Stream   string `toml:"stream"`
	Replicas int    `toml:"replicas"`
	MaxAge   string `toml:"max_age"`
	MaxBytes Size   `toml:"max_bytes"`
	// Timeout bounds each wait for the cluster, an acknowledgement or a
	// request ("2s", the default); an append in flight when a stream's
	// leader dies waits this long before the bus takes the store for
	// away. ReconnectWait is how long the client waits before it tries a
	// server it lost again ("500ms", the default).
	Timeout       string `toml:"timeout"`
	ReconnectWait string `toml:"reconnect_wait"`
}

// TimeoutDuration is Timeout parsed; 0 (the store's default) when empty.
func (j JetStreamConfig) TimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(j.Timeout)
	return d
}

// ReconnectWaitDuration is ReconnectWait parsed; 0 (the store's default)
// when empty.
func (j JetStreamConfig) ReconnectWaitDuration() time.Duration {
	d, _ := time.ParseDuration(j.ReconnectWait)
	return d
}

// OpenTimeoutDuration is OpenTimeout parsed; 0 (the store's default)
// when empty.
func (j JetStreamConfig) OpenTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(j.OpenTimeout)
	return d
}

// PasswordPath is PasswordFile under the data folder home; "" when it is
// not given.
func (j JetStreamConfig) PasswordPath(home string) string {
	if j.PasswordFile == "" {
		return ""
	}
	return underHome(home, j.PasswordFile)
}

// MaxAgeDuration is MaxAge parsed; 0 when it is empty.
func (j JetStreamConfig) MaxAgeDuration() time.Duration {
	d, _ := time.ParseDuration(j.MaxAge)
	return d
}

func (j JetStreamConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: "store.jetstream." + key, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case j.Embedded && j.URL != "":
		bad("url", "%q: give embedded = true (a server inside kairo) or url (an existing cluster), not both", RedactURL(j.URL))
	case !j.Embedded && j.URL == "":
		bad("embedded", "the jetstream store needs embedded = true (a server inside kairo) or url = \"nats://host:4222\" (an existing cluster)")
	}
	for _, u := range strings.Split(j.URL, ",") {
		if u = strings.TrimSpace(u); u == "" && j.URL != "" {
			bad("url", "%q has an empty entry; separate the servers' URLs with commas", RedactURL(j.URL))
		} else if u != "" {
			pu, err := url.Parse(u)
			if err != nil || (pu.Scheme != "nats" && pu.Scheme != "tls") || pu.Host == "" {
				bad("url", "%q is not a NATS URL; write nats://host:4222 (or tls://host:4222)", RedactURL(u))
			}
		}
	}
	if j.Listen != "" {
		if !j.Embedded {
			bad("listen", "%q: listen is for the embedded server (embedded = true); a cluster at url has its own", j.Listen)
		} else if host, port, err := net.SplitHostPort(j.Listen); err != nil || host == "" {
			bad("listen", "%q is not an address; write HOST:PORT, such as \"127.0.0.1:4222\"", j.Listen)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			bad("listen", "%q: the port %q is not a number from 0 to 65535; write HOST:PORT, such as \"127.0.0.1:4222\"", j.Listen, port)
		}
	}
	if j.Embedded {
		for key, v := range map[string]string{"creds": j.Creds, "nkey": j.NKey, "ca": j.CA, "cert": j.Cert, "key": j.Key} {
			if v != "" {
				bad(key, "is for a cluster at url; the embedded server needs none")
			}
		}
	}
	if (j.Cert == "") != (j.Key == "") {
		bad("cert", "give cert and key together (the client's certificate and its key)")
	}
	if j.Replicas < 0 || j.Replicas > 5 {
		bad("replicas", "%d: JetStream keeps 1 to 5 replicas of a stream", j.Replicas)
	}
	if j.Embedded && j.Replicas > 1 {
		bad("replicas", "%d: the embedded server is one node; replicas are a cluster's (give url)", j.Replicas)
	}
	if j.MaxAge != "" {
		if d, err := time.ParseDuration(j.MaxAge); err != nil || d <= 0 {
			bad("max_age", "%q: give a duration such as \"720h\", or leave it out to keep events forever", j.MaxAge)
		}
	}
	for key, v := range map[string]string{"timeout": j.Timeout, "reconnect_wait": j.ReconnectWait} {
		if d, err := time.ParseDuration(v); v != "" && (err != nil || d <= 0 || d > time.Hour) {
			bad(key, "%q: give a duration such as \"2s\" or \"500ms\" (at most an hour), or leave it out for the default", v)
		}
	}
	j.validateAccess(bad)
	if j.Stream != "" && strings.ContainsAny(j.Stream, " \t.*>/\\") {
		bad("stream", "%q: a stream name has no spaces, dots, wildcards or slashes", j.Stream)
	}
	return errs
}

// validateAccess checks who may log in: the peers of an embedded server
// that listens, on what address, and the user of a url.
func (j JetStreamConfig) validateAccess(bad func(key, format string, args ...any)) {
	switch {
	case j.Listen != "" && j.Embedded && len(j.Peers) == 0:
		bad("listen", "%q serves the stream to other hosts: name them, peers = [\"build-2\"], and each gets a password in the jetstream folder, peers/NAME.password", j.Listen)
	case j.Listen == "" && len(j.Peers) > 0:
		bad("peers", "peers join an embedded server that listens; give embedded = true and listen = \"127.0.0.1:4222\" too")
	case j.Listen != "" && !j.AllowRemote && !Loopback(j.Listen):
		if _, port, err := net.SplitHostPort(j.Listen); err == nil && port != "" {
			bad("listen", "%q is not a loopback address: other machines could reach the stream; listen on \"127.0.0.1:%s\", or set allow_remote = true to mean it (the peers' passwords cross the network in clear: a trusted network only)", j.Listen, port)
		}
	case j.AllowRemote && j.Listen == "":
		bad("allow_remote", "is for listen, which serves the embedded stream to other hosts; leave it out")
	}
	seen := map[string]bool{}
	for _, p := range j.Peers {
		switch {
		case !validHostName(p) || strings.Trim(p, ".") != p || strings.Contains(p, ".."):
			bad("peers", "%q is not a host name: 1 to %d letters, digits, \"-\", \"_\", and dots between them, as the peer's [host] name", p, MaxHostName)
		case seen[p]:
			bad("peers", "%q is named twice", p)
		}
		seen[p] = true
	}
	switch {
	case j.PasswordFile != "" && j.URL == "":
		bad("password_file", "logs in to a server at url; the embedded server makes its peers' passwords itself")
	case j.User != "" && j.PasswordFile == "":
		bad("user", "%q needs password_file, the file that holds its password (a peer's is the serving host's jetstream/peers/NAME.password)", j.User)
	case j.PasswordFile != "" && (j.Creds != "" || j.NKey != ""):
		bad("password_file", "give one way to log in: password_file, creds or nkey")
	case j.PasswordFile != "" && strings.Contains(j.URL, "@"):
		bad("password_file", "the url holds credentials already; give one way to log in: take them out of the url")
	}
	if j.OpenTimeout != "" {
		if d, err := time.ParseDuration(j.OpenTimeout); err != nil || d <= 0 || d > 24*time.Hour {
			bad("open_timeout", "%q: give a duration such as \"60s\" or \"5m\" (at most a day), or leave it out for the default, 60s", j.OpenTimeout)
		}
	}
}

// StorePath is the SQLite file for a daemon whose data folder is home.
func (c *Config) StorePath(home string) string { return underHome(home, c.Store.Path) }

// CheckpointsDir is the folder of the folds' checkpoints
// (kernel/bus/checkpoint) in the data folder home, whatever the store (a
// JetStream host keeps its own); "" for the in-memory store, whose log
// does not outlive the daemon.
func (c *Config) CheckpointsDir(home string) string {
	if c.Store.Kind == StoreMemory {
		return ""
	}
	return filepath.Join(home, "checkpoints")
}

// CheckpointPath is the file in CheckpointsDir that the fold named name
// keeps its checkpoint in; "" when there is none.
func (c *Config) CheckpointPath(home, name string) string {
	if dir := c.CheckpointsDir(home); dir != "" {
		return filepath.Join(dir, name+".ckp")
	}
	return ""
}

// JetStreamPath is the embedded JetStream server's folder under home.
func (c *Config) JetStreamPath(home string) string {
	dir := c.Store.JetStream.Dir
	if dir == "" {
		dir = "jetstream"
	}
	return underHome(home, dir)
}
