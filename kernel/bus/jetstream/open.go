package jetstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/manifests"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// What a store does when it opens beside other hosts: it waits for a
// cluster that is still forming (retry), creates the stream only when there
// is none and otherwise leaves it as the operator made it (drift, apply),
// gives the hosts that join an embedded server their passwords, and keeps
// the credentials of a URL out of everything it shows.

// Backoff of the retries while a store opens.
const (
	openRetryFirst = 250 * time.Millisecond
	openRetryMax   = 5 * time.Second
)

// fillAuth checks the options of who may log in: the peers of an
// embedded server that listens, and the user of a URL.
func (o *Config) fillAuth() error {
	switch {
	case o.Listen != "" && !o.Embedded:
		return errors.New("jetstream store: listen is for the embedded server; a cluster at a url has its own")
	case o.Listen != "" && len(o.Peers) == 0:
		return fmt.Errorf("jetstream store: listen %q serves other hosts: name them, peers = [\"build-2\"], each gets a password in %s", o.Listen, PeerPasswordFile(o.Dir, "NAME"))
	case o.Listen == "" && len(o.Peers) > 0:
		return errors.New("jetstream store: peers join an embedded server that listens; give listen = \"127.0.0.1:4222\" too")
	case o.Listen != "" && !o.AllowRemote && !manifests.Loopback(o.Listen):
		return fmt.Errorf("jetstream store: listen %q is not a loopback address: other machines could reach it; listen on 127.0.0.1, or set allow_remote to mean it", o.Listen)
	}
	seen := map[string]bool{localUser(*o): true}
	for _, p := range o.Peers {
		if p == "" || strings.ContainsAny(p, "*>/\\") || abi.ValidateSubject(hostSubject(o.Prefix, p)) != nil {
			return fmt.Errorf("jetstream store: peer %q is not a host name: letters, digits, \"-\", \"_\" and dots between them", p)
		}
		if seen[p] {
			return fmt.Errorf("jetstream store: peer %q is named twice, or is this host's own name", p)
		}
		seen[p] = true
	}
	if o.PasswordFile != "" && o.User == "" {
		o.User = o.Host
	}
	switch {
	case o.User != "" && o.PasswordFile == "":
		return fmt.Errorf("jetstream store: user %q needs password_file, the file that holds its password", o.User)
	case o.PasswordFile != "" && o.User == "":
		return errors.New("jetstream store: password_file needs a user: give user, or a [host] name")
	case o.PasswordFile != "" && (o.CredsFile != "" || o.NKeySeedFile != "" || len(secrets(o.URL)) > 0):
		return errors.New("jetstream store: give one way to log in: password_file, creds, nkey, or credentials in the url")
	}
	return nil
}

// retryOpen runs step until it succeeds, fails for good (a configuration
// error: permanent), or the context ends, waiting openRetryFirst, doubling
// to openRetryMax, between tries. Each try gets at most attempt. Two hosts
// started together on a fresh cluster find JetStream without a leader for
// a few seconds; a host that gave up at the first timeout would not start.
func retryOpen(ctx context.Context, log *slog.Logger, what string, attempt time.Duration, step func(context.Context) error) error {
	wait := openRetryFirst
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := step(actx)
		cancel()
		if err == nil || permanent(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (gave up after %d tries; [store.jetstream] open_timeout sets how long to try)", err, try)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			wait = max(time.Until(deadline), 0)
		}
		log.Warn("the JetStream store cannot "+what+" yet; trying again", "try", try, "in", wait, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up after %d tries; [store.jetstream] open_timeout sets how long to try)", err, try)
		case <-time.After(wait):
		}
		wait = min(2*wait, openRetryMax)
	}
}

// permanent reports whether err is one that trying again cannot mend:
// credentials the server refuses, a permission it does not grant, a
// certificate that does not verify, a stream configuration it rejects.
func permanent(err error) bool {
	for _, e := range []error{nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrAccountAuthExpired, nats.ErrPermissionViolation, nats.ErrNkeysNotSupported, errNotPermitted} {
		if errors.Is(err, e) {
			return true
		}
	}
	var final *permanentError
	if errors.As(err, &final) {
		return true
	}
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var badCert *tls.CertificateVerificationError
	if errors.As(err, &unknownCA) || errors.As(err, &badHost) || errors.As(err, &badCert) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// A configuration the server rejects. The rest (no leader, no
		// peers for placement, insufficient resources) is what a cluster
		// that is still forming answers.
		switch apiErr.ErrorCode {
		case 10065, // subjects overlap with an existing stream
			10052, // invalid stream configuration
			10053, // stream limits beyond the account's
			10074, // replicas > 1 on a server that is not clustered
			10027, // maximum number of streams reached
			10006, // JetStream not in clustered mode
			jetstream.JSErrCodeJetStreamNotEnabledForAccount:
			return true
		}
	}
	return false
}

// errNotPermitted marks an error that says what the server refused.
var errNotPermitted = errors.New("not permitted")

// transient reports whether err is a server that did not answer in time,
// as one whose stream has no leader yet does.
func transient(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// notFoundYet reports whether err says the stream does not exist, which
// the first read of a stream just found or made can hear: the server that
// answers may not have learnt of it from its cluster yet. Open found the
// stream, so trying again is right; the retries are bounded by
// OpenTimeout.
func notFoundYet(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || strings.Contains(err.Error(), "stream not found")
}

// permanentError is an error that trying again cannot mend: a stream or a
// file that is not what it must be. Its text is its error's.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// denials remembers the permission violations the server reports on a
// connection. The server answers a request it does not permit with an
// asynchronous error, not a reply: the request itself would only time out,
// and be retried, although no retry can succeed.
type denials struct {
	mu   sync.Mutex
	n    int
	last string
	log  *slog.Logger
}

func (d *denials) handle(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	d.mu.Lock()
	d.n++
	d.last = err.Error()
	d.mu.Unlock()
	d.log.Warn("the NATS server refused what this host asked: its user lacks the permission", "error", err)
}

// since is the last denial after the count n, if there was one.
func (d *denials) since(n int) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last, d.n > n
}

func (d *denials) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// checkDenied turns err into a permanent error when the server refused a
// permission since the count n: a timeout then only says the server did
// not answer what it would not allow.
func (s *Store) checkDenied(n int, what string, err error) error {
	if err == nil {
		return nil
	}
	if last, ok := s.denied.since(n); ok {
		return fmt.Errorf("%s: %w: %s; this user may not do that (`kairo store permissions HOST` prints what a host may do; kairo store apply needs an operator's user)", what, errNotPermitted, last)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// dial starts the embedded server (when opts say so) and connects to it,
// or to the cluster at the URL, retrying until OpenTimeout.
func (s *Store) dial(ctx context.Context) error {
	opts := s.opts
	s.denied = &denials{log: opts.Logger}
	if opts.Embedded {
		var local nats.Option
		var err error
		if s.srv, local, err = startEmbedded(opts); err != nil {
			return err
		}
		if local != nil {
			s.local = []nats.Option{local}
		}
	}
	err := retryOpen(ctx, opts.Logger, "connect to "+s.describe, opts.OpenTimeout, func(context.Context) error {
		nc, err := connect(opts, s.srv, append(s.local, nats.ErrorHandler(s.denied.handle))...)
		if err != nil {
			return s.redact(fmt.Errorf("connect: %w", err))
		}
		s.nc = nc
		return nil
	})
	if err != nil {
		return err
	}
	if s.js, err = jetstream.New(s.nc, jetstream.WithDefaultTimeout(opts.Timeout)); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return nil
}

// shut closes what dial opened, for a store that does not open.
func (s *Store) shut() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
}
