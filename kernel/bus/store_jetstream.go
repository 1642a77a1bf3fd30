package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// JetStreamOptions configures a JetStreamStore: either Embedded with Dir,
// or URL and its credentials for an existing NATS cluster. The zero value
// of everything else is useful.
type JetStreamOptions struct {
	// Embedded starts a nats-server with JetStream inside the process,
	// storing under Dir and listening on no port: one host, no other
	// process to run.
	Embedded bool
	// Dir is where the embedded server keeps its streams. Required when
	// Embedded.
	Dir string
	// Listen, with Embedded, also serves clients on this address
	// ("127.0.0.1:4222"), without authentication: keep it on loopback.
	// Empty serves only this process.
	Listen string
	// SyncAlways, with Embedded, has the server fsync every write. Without
	// it a stored event is in the operating system's page cache when it is
	// acknowledged — it survives any crash of the process, as SQLite's
	// synchronous "normal" does, and the server syncs every two minutes.
	SyncAlways bool

	// URL is the cluster to connect to ("nats://a:4222,nats://b:4222")
	// when not Embedded.
	URL string
	// CredsFile is a NATS credentials file (a user JWT and its nkey seed).
	CredsFile string
	// NKeySeedFile is a file holding a user nkey seed ("SU…").
	NKeySeedFile string
	// CAFile, CertFile and KeyFile set up TLS: the CA that signs the
	// servers' certificates, and this client's certificate and key.
	CAFile, CertFile, KeyFile string

	// Stream is the stream's name. Default DefaultJetStreamStream.
	Stream string
	// Prefix is the first token(s) of the stream's subjects, so that
	// several Kairo installations can share one cluster, each with its own
	// stream and prefix. Default: Stream.
	Prefix string
	// Replicas is the stream's replica count on a cluster. Default 1.
	Replicas int
	// MaxAge removes events older than this. Zero keeps them for good.
	// A removed event is no longer a duplicate: its ID may be stored again.
	MaxAge time.Duration
	// MaxBytes bounds the stream; once it is reached appends are refused
	// with a *StreamFullError, never by dropping old events. Zero: no bound.
	MaxBytes int64
	// DuplicateWindow is JetStream's own window for Nats-Msg-Id; the store
	// does not rely on it (its deduplication is permanent) and sets the
	// server's minimum by default. Tests shorten it.
	DuplicateWindow time.Duration
	// Timeout bounds each wait for the server: an acknowledgement, a
	// request. Default 10 s.
	Timeout time.Duration
}

// DefaultJetStreamStream is the stream a JetStreamStore uses by default.
const DefaultJetStreamStream = "KAIRO"

func (o *JetStreamOptions) fill() error {
	if o.Stream == "" {
		o.Stream = DefaultJetStreamStream
	}
	if strings.ContainsAny(o.Stream, ".*> \t\r\n/\\") {
		return fmt.Errorf("jetstream store: stream %q: a stream name has no dots, wildcards, spaces or slashes", o.Stream)
	}
	if o.Prefix == "" {
		o.Prefix = o.Stream
	}
	if err := ValidateSubject(o.Prefix); err != nil {
		return fmt.Errorf("jetstream store: prefix: %w", err)
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas < 1 || o.Replicas > 5 {
		return fmt.Errorf("jetstream store: replicas %d: want 1 to 5", o.Replicas)
	}
	if o.MaxAge < 0 || o.MaxBytes < 0 || o.DuplicateWindow < 0 || o.Timeout < 0 {
		return errors.New("jetstream store: max_age, max_bytes, duplicate window and timeout cannot be negative")
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = 100 * time.Millisecond // the server's minimum
	}
	switch {
	case o.Embedded && o.Dir == "":
		return errors.New("jetstream store: embedded needs a dir to keep the stream in")
	case o.Embedded && o.URL != "":
		return errors.New("jetstream store: set either embedded (with a dir) or url, not both")
	case !o.Embedded && o.URL == "":
		return errors.New("jetstream store: set embedded (with a dir) or the url of a NATS cluster")
	case o.Embedded && (o.CredsFile != "" || o.NKeySeedFile != "" || o.CAFile != "" || o.CertFile != "" || o.KeyFile != ""):
		return errors.New("jetstream store: credentials and TLS files are for a url, not for the embedded server")
	case (o.CertFile == "") != (o.KeyFile == ""):
		return errors.New("jetstream store: a client certificate needs both cert_file and key_file")
	}
	return nil
}

// JetStreamStore keeps events in a NATS JetStream stream. Each event is one
// message whose data is its envelope (abi.AppendEvent) and whose subject is
// PREFIX.ID.TYPE, the ID encoded as one token (jetStreamIDToken). Sequence
// numbers are the stream's own. See docs/RATIONALE.md, "The event bus".
type JetStreamStore struct {
	opts     JetStreamOptions
	describe string
	srv      *server.Server // nil unless embedded
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	last     atomic.Uint64

	mu     sync.Mutex // serialises appends, as the bus does, and Close
	closed bool
}

// OpenJetStream connects to (or, Embedded, starts) a JetStream server and
// creates or updates the stream: an existing stream keeps its events and
// takes the limits of opts.
func OpenJetStream(opts JetStreamOptions) (*JetStreamStore, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &JetStreamStore{opts: opts}
	var err error
	if opts.Embedded {
		if s.srv, err = startEmbedded(opts); err != nil {
			return nil, err
		}
		s.describe = "jetstream embedded at " + opts.Dir
	} else {
		s.describe = "jetstream " + opts.URL + " stream " + opts.Stream
	}
	fail := func(what string, err error) (*JetStreamStore, error) {
		if s.nc != nil {
			s.nc.Close()
		}
		if s.srv != nil {
			s.srv.Shutdown()
			s.srv.WaitForShutdown()
		}
		return nil, fmt.Errorf("open %s: %s: %w", s.describe, what, err)
	}
	if s.nc, err = connect(opts, s.srv); err != nil {
		return fail("connect", err)
	}
	if s.js, err = jetstream.New(s.nc,
		jetstream.WithPublishAsyncMaxPending(2*appendWindow),
		jetstream.WithPublishAsyncTimeout(opts.Timeout),
		jetstream.WithDefaultTimeout(opts.Timeout)); err != nil {
		return fail("jetstream", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	cfg := jetstream.StreamConfig{
		Name:        opts.Stream,
		Description: "Kairo's event bus",
		Subjects:    []string{opts.Prefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
		MaxAge:      opts.MaxAge,
		MaxBytes:    opts.MaxBytes,
		// A full stream refuses new events: dropping old ones would drop
		// what replay and deduplication stand on.
		Discard:     jetstream.DiscardNew,
		Duplicates:  opts.DuplicateWindow,
		AllowDirect: true,
	}
	if opts.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	if s.stream, err = s.js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fail("create stream "+opts.Stream, err)
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return fail("stream info", err)
	}
	s.last.Store(info.State.LastSeq)
	return s, nil
}

func startEmbedded(opts JetStreamOptions) (*server.Server, error) {
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	so := &server.Options{
		ServerName: "kairo",
		JetStream:  true,
		StoreDir:   dir,
		DontListen: opts.Listen == "",
		NoSigs:     true,
		NoLog:      true,
		SyncAlways: opts.SyncAlways,
		// The server's limit of a message: an event's data (MaxEventData)
		// and its envelope.
		MaxPayload: MaxEventData + 64<<10,
	}
	if opts.Listen != "" {
		host, port, err := splitHostPort(opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("jetstream store: listen %q: %w", opts.Listen, err)
		}
		so.Host, so.Port = host, port
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("jetstream store: start the embedded server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(opts.Timeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("jetstream store: the embedded server at %s was not ready within %v", dir, opts.Timeout)
	}
	return srv, nil
}

func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, errors.New("want host:port")
	}
	var port int
	if _, err := fmt.Sscanf(addr[i+1:], "%d", &port); err != nil || port < 0 || port > 65535 {
		return "", 0, errors.New("want a port number after the colon")
	}
	return addr[:i], port, nil
}

func connect(opts JetStreamOptions, srv *server.Server) (*nats.Conn, error) {
	no := []nats.Option{
		nats.Name("kairo"),
		nats.MaxReconnects(-1),
		nats.Timeout(opts.Timeout),
	}
	url := opts.URL
	if srv != nil {
		no = append(no, nats.InProcessServer(srv))
		url = ""
	}
	if opts.CredsFile != "" {
		no = append(no, nats.UserCredentials(opts.CredsFile))
	}
	if opts.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(opts.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey seed file %s: %w", opts.NKeySeedFile, err)
		}
		no = append(no, o)
	}
	if opts.CAFile != "" {
		no = append(no, nats.RootCAs(opts.CAFile))
	}
	if opts.CertFile != "" {
		no = append(no, nats.ClientCert(opts.CertFile, opts.KeyFile))
	}
	return nats.Connect(url, no...)
}

// Describe is "jetstream embedded at DIR" or "jetstream URL stream NAME".
func (s *JetStreamStore) Describe() string { return s.describe }

// GroupCommit is true: an append waits for a round trip to the server, so
// the bus hands it the events of many publishers at once, published
// together and acknowledged together.
func (s *JetStreamStore) GroupCommit() bool { return true }

// LastSeq is the stream sequence of the last event this store appended, or
// the stream's last sequence when it was opened; it reads no network.
func (s *JetStreamStore) LastSeq() uint64 { return s.last.Load() }

// Close drains the connection (every acknowledgement in flight arrives)
// and stops the embedded server.
func (s *JetStreamStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.nc != nil {
		done := make(chan struct{})
		s.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
		if err = s.nc.Drain(); err == nil {
			select {
			case <-done:
			case <-time.After(s.opts.Timeout):
				s.nc.Close()
			}
		} else {
			s.nc.Close()
		}
	}
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", s.describe, err)
	}
	return nil
}

// EncodeEnv encodes the stored form of ev, the message data: the envelope
// without seq, which is the stream's.
func (s *JetStreamStore) EncodeEnv(ev *abi.Event) ([]byte, error) {
	e := *ev
	e.Seq = 0
	return abi.AppendEvent(make([]byte, 0, 128+len(e.Data)), &e), nil
}
