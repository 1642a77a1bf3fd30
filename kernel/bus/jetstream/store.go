package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// Config configures a [Store]: either Embedded with Dir,
// or URL and its credentials for an existing NATS cluster. The zero value
// of everything else is useful.
type Config struct {
	// Embedded starts a nats-server with JetStream inside the process,
	// storing under Dir and listening on no port: one host, no other
	// process to run.
	Embedded bool
	// Dir is where the embedded server keeps its streams. Required when
	// Embedded.
	Dir string
	// Listen, with Embedded, also serves the hosts of Peers on this
	// address ("127.0.0.1:4222"), each with its own password and
	// HostPermissions. A loopback address unless AllowRemote. Empty serves
	// only this process.
	Listen string
	// Peers are the other hosts that may join an embedded server that
	// listens, by their [host] names; Listen needs at least one. Each
	// gets a password, made at the first start and kept in
	// PeerPasswordFile(Dir, NAME), and may append only as itself.
	Peers []string
	// AllowRemote lets Listen be an address other machines reach. The
	// passwords cross the network in clear: a trusted network only.
	AllowRemote bool
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
	// User and PasswordFile log in with a user and its password (the
	// first line of the file, mode 0600), as a host that joins another's
	// embedded server does: User defaults to Host.
	User, PasswordFile string

	// Stream is the stream's name. Default DefaultStream.
	Stream string
	// Prefix is the first token(s) of the stream's subjects, PREFIX.log
	// and PREFIX.log.>, so that several Kairo installations can share one
	// cluster, each with its own stream and prefix. Default: Stream.
	Prefix string
	// Host is the name of the host this store writes for, the bus's
	// Config.Host: its messages go to PREFIX.log.HOST (PREFIX.log for a
	// host of no name), the subject a cluster's permissions give that host
	// alone. A reader takes an event's host from the subject its message
	// was stored on, never from the event
	// (docs/RATIONALE.md#several-hosts-one-log).
	Host string
	// Replicas, MaxAge and MaxBytes are the stream's settings. A store
	// that finds no stream creates it with them; one that finds the
	// stream leaves it as it is and reports each setting that differs
	// (Drift), which Apply applies. Zero is "not set": no opinion
	// on a stream that exists, and the default on one created.
	//
	// Replicas is the stream's replica count on a cluster (default 1).
	Replicas int
	// MaxAge removes events older than this (default: kept for good).
	// A removed event is no longer a duplicate: its ID may be stored again.
	MaxAge time.Duration
	// MaxBytes bounds the stream; once it is reached appends are refused
	// with a *StreamFullError, never by dropping old events (default: no
	// bound). Once the store is open it holds the stream's own bound.
	MaxBytes int64
	// DuplicateWindow is JetStream's own window for Nats-Msg-Id, which the
	// store does not use: its deduplication is its own and permanent. It
	// is set on the stream, the server's minimum by default.
	DuplicateWindow time.Duration
	// Timeout bounds each wait for the server: an acknowledgement, a
	// request. Default DefaultTimeout.
	Timeout time.Duration
	// ReconnectWait is how long the client waits before it tries a server
	// it lost again. Default DefaultReconnectWait.
	ReconnectWait time.Duration
	// OpenTimeout bounds how long Open tries to connect and to
	// find or create the stream, with backoff, while a cluster is not
	// ready. Credentials or permissions the server refuses fail at once.
	// Default 60 s.
	OpenTimeout time.Duration
	// Logger receives the retries while the store opens and the
	// permissions the server refuses. Default: slog.Default().
	Logger *slog.Logger
}

// DefaultStream is the stream a [Store] uses by default.
const DefaultStream = "KAIRO"

func (o *Config) fill() error {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if strings.ContainsAny(o.Stream, ".*> \t\r\n/\\") {
		return fmt.Errorf("jetstream store: stream %q: a stream name has no dots, wildcards, spaces or slashes", o.Stream)
	}
	if o.Prefix == "" {
		o.Prefix = o.Stream
	}
	if err := abi.ValidateSubject(o.Prefix); err != nil {
		return fmt.Errorf("jetstream store: prefix: %w", err)
	}
	if err := abi.ValidateSubject(hostSubject(o.Prefix, o.Host)); err != nil || strings.ContainsAny(o.Host, "*>") {
		return fmt.Errorf("jetstream store: host %q is not a name a subject can carry: letters, digits, \"-\", \"_\" and dots between them", o.Host)
	}
	if o.Replicas < 0 || o.Replicas > 5 {
		return fmt.Errorf("jetstream store: replicas %d: want 1 to 5", o.Replicas)
	}
	if o.MaxAge < 0 || o.MaxBytes < 0 || o.DuplicateWindow < 0 || o.Timeout < 0 || o.OpenTimeout < 0 {
		return errors.New("jetstream store: max_age, max_bytes, duplicate window, timeout and open_timeout cannot be negative")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ReconnectWait <= 0 {
		o.ReconnectWait = DefaultReconnectWait
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := o.fillAuth(); err != nil {
		return err
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
	case o.Embedded && (o.CredsFile != "" || o.NKeySeedFile != "" || o.CAFile != "" || o.CertFile != "" || o.KeyFile != "" || o.User != "" || o.PasswordFile != ""):
		return errors.New("jetstream store: credentials and TLS files are for a url, not for the embedded server")
	case (o.CertFile == "") != (o.KeyFile == ""):
		return errors.New("jetstream store: a client certificate needs both cert_file and key_file")
	}
	return nil
}

// Store keeps events in a NATS JetStream stream, one message per
// append on the subject PREFIX.log (store_jetstream_format.go). Sequence
// numbers are the store's own, dense across messages; an index of each
// message's first seq (seqIndex) and one of the IDs (idIndex), both in
// memory and built when the store opens, serve replay and permanent
// deduplication. Several stores may append to one stream, on several
// hosts: each publish expects the stream's last sequence to be the one the
// store knows, and a store that finds another writer was first reads what
// it appended and tries again. See
// docs/RATIONALE.md#several-writers-on-one-stream.
type Store struct {
	opts     Config
	describe string
	srv      *server.Server // nil unless embedded
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	subject  string // PREFIX.log.HOST, where this store publishes
	logSubj  string // PREFIX.log
	writer   string // this store's name in its messages' hdrMsgID
	maxData  int    // the most data one message holds
	ctx      context.Context
	cancel   context.CancelFunc // ends Follow, on Close
	wg       sync.WaitGroup     // Follow's goroutines

	// mu serialises appends, catching up with other writers, and Close;
	// an append holds it through its round trips to the server, as the bus
	// holds its own lock. It guards what follows up to imu.
	mu         sync.Mutex
	closed     bool
	ids        idIndex
	lastStream uint64          // every message up to this stream sequence is indexed
	sent       uint64          // messages published, numbering hdrMsgID
	fetched    *jsMessage      // the last message read back to confirm a duplicate
	followers  []chan struct{} // woken when another writer's events are indexed
	scratch    struct {        // an append's buffers, kept for the next
		buf  []byte
		undo []idUndo
		ids  [][]byte
	}
	skips skipLog // what the store skipped, for the bus to report

	// What opening found and made (store_jetstream_open.go).
	drift  []string      // settings of opts the stream differs in
	denied *denials      // permissions the server refused
	local  []nats.Option // the embedded server's login for this process

	// imu guards seqs, which Scan reads while an append runs. seqs and
	// last change under mu and imu both.
	imu  sync.RWMutex
	seqs seqIndex
	last atomic.Uint64 // seq of the last event stored, by any writer
}

// Open connects to (or, Embedded, starts) a JetStream server,
// finds the stream or, when there is none, creates it, and reads it once
// to build the store's indexes: about a second per million events
// (docs/RATIONALE.md#jetstream-for-more-than-one-machine). It never changes a stream that exists: Drift says
// what differs from opts, [Apply] applies it. While the server
// cannot be reached or its cluster has no leader yet it tries again, with
// backoff, for OpenTimeout; credentials or permissions it refuses fail at
// once.
func Open(opts Config) (*Store, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, subject: hostSubject(opts.Prefix, opts.Host), logSubj: opts.Prefix + ".log", writer: nats.NewInbox()[len(nats.InboxPrefix):], ids: newIDIndex()}
	s.describe = describe(opts)
	fail := func(what string, err error) (*Store, error) {
		s.shut()
		if what == "" {
			return nil, s.redact(fmt.Errorf("open %s: %w", s.describe, err))
		}
		return nil, s.redact(fmt.Errorf("open %s: %s: %w", s.describe, what, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.OpenTimeout)
	defer cancel()
	if err := s.dial(ctx); err != nil {
		return fail("", err)
	}
	s.maxData = int(s.nc.MaxPayload()) - jsHeaderRoom
	if err := s.openStream(ctx); err != nil {
		return fail("", err)
	}
	// What the stream refuses at is its own bound, which a full stream's
	// error names.
	s.opts.MaxBytes = max(s.stream.CachedInfo().Config.MaxBytes, 0)
	// A stream just made on a cluster may have no leader yet to answer:
	// reading waits for it, as finding the stream does. Each read goes on
	// from what the last indexed.
	err := retryOpen(ctx, opts.Logger, "read stream "+opts.Stream, opts.OpenTimeout, func(context.Context) error {
		// Reading a large stream takes longer than one request may, or
		// than OpenTimeout.
		s.mu.Lock()
		err := s.catchUpLocked(context.Background(), 0)
		s.mu.Unlock()
		if err != nil && !transient(err) && !notFoundYet(err) {
			return &permanentError{err}
		}
		return err
	})
	if err != nil {
		return fail("read the stream", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// checkFormat refuses a stream that holds events in the format of an
// earlier Kairo, one message per event on PREFIX.ID.TYPE: its first
// message is on no log subject. A message on the log's subjects that is
// not Kairo's is the scan's to skip and report, not a reason to refuse.
func (s *Store) checkFormat(ctx context.Context, st jetstream.Stream) error {
	info := st.CachedInfo()
	if info.State.Msgs == 0 {
		return nil
	}
	raw, err := st.GetMsg(ctx, info.State.FirstSeq, jetstream.WithGetMsgSubject(">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: read its first message: %w", s.opts.Stream, err)
	}
	if _, ok := s.writerHost(raw.Subject); ok {
		return nil
	}
	if _, err := parseMessage(raw.Sequence, raw.Subject, raw.Header, raw.Data); err != nil {
		return s.notOurs(raw.Sequence, raw.Subject, err)
	}
	return nil
}

// hostSubject is the subject the store of host publishes on.
func hostSubject(prefix, host string) string {
	if host == "" {
		return prefix + ".log"
	}
	return prefix + ".log." + host
}

// writerHost is the host a message on subject was written for, as the
// subject names it; ok is false for a subject that is not the log's.
func (s *Store) writerHost(subject string) (host string, ok bool) {
	rest, found := strings.CutPrefix(subject, s.logSubj)
	switch {
	case !found:
		return "", false
	case rest == "":
		return "", true
	case rest[0] == '.' && len(rest) > 1:
		return rest[1:], true
	}
	return "", false
}

// notOurs is the error for a stream message the store cannot read.
func (s *Store) notOurs(seq uint64, subject string, err error) error {
	if errors.Is(err, errNotKairoMessage) {
		return fmt.Errorf("stream %s holds events in the format of an earlier Kairo, one message per event (message %d on %s): this Kairo keeps a message per append; move the stream aside (nats stream backup %s DIR, then nats stream rm %s) or set [store.jetstream] stream to another name",
			s.opts.Stream, seq, subject, s.opts.Stream, s.opts.Stream)
	}
	return fmt.Errorf("stream %s: message %d on %s: %w", s.opts.Stream, seq, subject, err)
}

// startEmbedded starts the embedded server. One that listens takes only
// users: this process's own connection, by a password made now and kept
// in memory (returned as the option that logs in with it), and each peer,
// by the password of its file, with HostPermissions alone.
func startEmbedded(opts Config) (*server.Server, nats.Option, error) {
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("jetstream store: %w", err)
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
		MaxPayload: bus.MaxEventData + 64<<10,
	}
	var local nats.Option
	if opts.Listen != "" {
		host, port, err := splitHostPort(opts.Listen)
		if err != nil {
			return nil, nil, fmt.Errorf("jetstream store: listen %q: %w", opts.Listen, err)
		}
		so.Host, so.Port = host, port
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, nil, err
		}
		self, pw := localUser(opts), base64.RawURLEncoding.EncodeToString(b[:])
		so.Users = []*server.User{{
			Username: self, Password: pw,
			// Nothing outside this process can log in as it.
			AllowedConnectionTypes: map[string]struct{}{"IN_PROCESS": {}},
		}}
		for _, peer := range opts.Peers {
			ppw, err := peerPassword(dir, peer)
			if err != nil {
				return nil, nil, err
			}
			so.Users = append(so.Users, &server.User{Username: peer, Password: ppw, Permissions: HostPermissions(opts.Stream, opts.Prefix, peer).server()})
		}
		local = nats.UserInfo(self, pw)
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, nil, fmt.Errorf("jetstream store: start the embedded server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(opts.Timeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, nil, fmt.Errorf("jetstream store: the embedded server at %s was not ready within %v", dir, opts.Timeout)
	}
	return srv, local, nil
}

// localUser is the embedded server's user for its own process: the host's
// name, which no peer may take.
func localUser(opts Config) string {
	if opts.Host != "" {
		return opts.Host
	}
	return "kairo-local"
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

func connect(opts Config, srv *server.Server, extra ...nats.Option) (*nats.Conn, error) {
	no := []nats.Option{
		nats.Name("kairo"),
		nats.MaxReconnects(-1),
		// A publish while the server is away fails at once rather than
		// wait in the client to be sent on reconnect, after its append
		// was reported failed.
		nats.ReconnectBufSize(-1),
		nats.Timeout(opts.Timeout),
		nats.ReconnectWait(opts.ReconnectWait),
	}
	url := opts.URL
	if srv != nil {
		no = append(no, nats.InProcessServer(srv))
		url = ""
	} else if opts.Host != "" {
		// The inboxes HostPermissions lets this host subscribe to.
		no = append(no, nats.CustomInboxPrefix(InboxPrefix(opts.Host)))
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
	if opts.PasswordFile != "" {
		pw, err := ReadPasswordFile(opts.PasswordFile)
		if err != nil {
			// Not a connection that failed: trying again cannot mend it.
			return nil, &permanentError{err}
		}
		no = append(no, nats.UserInfo(opts.User, pw))
	}
	if opts.CAFile != "" {
		no = append(no, nats.RootCAs(opts.CAFile))
	}
	if opts.CertFile != "" {
		no = append(no, nats.ClientCert(opts.CertFile, opts.KeyFile))
	}
	return nats.Connect(url, append(no, extra...)...)
}

// Describe is "jetstream embedded at DIR" or "jetstream URL stream NAME",
// the URL without its passwords: nats://user:xxxxx@host:4222.
func (s *Store) Describe() string { return s.describe }

// GroupCommit is true: an append waits for a round trip to the server, so
// the bus hands it the events of many publishers at once, published in one
// message and acknowledged together.
func (s *Store) GroupCommit() bool { return true }

// LastSeq is the seq of the last event stored, by this store or, as far
// as it has seen them (an append, Follow), by other writers on the stream.
// It reads no network.
func (s *Store) LastSeq() uint64 { return s.last.Load() }

// Close stops Follow, drains the connection and stops the embedded server.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
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

// EncodeEnv encodes the stored form of ev, one envelope of a message's
// data: without seq, which the message's header gives.
func (s *Store) EncodeEnv(ev *abi.Event) ([]byte, error) {
	e := *ev
	e.Seq = 0
	return abi.AppendEvent(make([]byte, 0, 128+len(e.Data)), &e), nil
}
