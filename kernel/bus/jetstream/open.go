package jetstream

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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

// openStream finds the stream, or creates it when there is none, retrying
// while the cluster is not ready. It never changes a stream that exists:
// what differs from the options is reported by Drift, and applied only by
// Apply. A stream whose subjects cannot take this store's
// messages is refused.
func (s *Store) openStream(ctx context.Context) error {
	attempt := min(s.opts.Timeout, s.opts.OpenTimeout)
	return retryOpen(ctx, s.opts.Logger, "find or create stream "+s.opts.Stream, attempt, func(ctx context.Context) error {
		n := s.denied.count()
		st, err := s.js.Stream(ctx, s.opts.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			st, err = s.js.CreateStream(ctx, streamConfig(s.opts))
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				// Another host created it in between: look again.
				return fmt.Errorf("create stream %s: %w", s.opts.Stream, err)
			}
			if err != nil {
				if _, ok := s.denied.since(n); ok {
					// A host that may not create the stream waits for one that may.
					return fmt.Errorf("stream %s does not exist, and this host may not create it: start the host that serves it first, or create it (kairo store apply, on a host whose user may)", s.opts.Stream)
				}
				return s.checkDenied(n, "create stream "+s.opts.Stream, err)
			}
		} else if err != nil {
			return s.checkDenied(n, "look up stream "+s.opts.Stream, err)
		}
		cfg := st.CachedInfo().Config
		// This host's own subject is what it needs: a stream of the Kairo
		// before, on PREFIX.log alone, still serves a host of no name (one
		// host's store), and its drift says what apply would add.
		if !subjectCovers(cfg.Subjects, s.subject) {
			return &permanentError{fmt.Errorf("stream %s takes the subjects %s, not %s, where this host appends: run `kairo store apply` to set its subjects (or nats stream edit %s --subjects %s --subjects '%s.>')",
				s.opts.Stream, strings.Join(cfg.Subjects, ", "), s.subject, s.opts.Stream, s.logSubj, s.logSubj)}
		}
		if err := s.checkFormat(ctx, st); err != nil && !transient(err) {
			return &permanentError{err}
		} else if err != nil {
			return err
		}
		s.stream, s.drift = st, drift(s.opts, s.logSubj, cfg)
		return nil
	})
}

// streamConfig is the stream a store creates when there is none: the
// options, and the defaults for what they leave unset.
func streamConfig(opts Config) jetstream.StreamConfig {
	logSubj := opts.Prefix + ".log"
	replicas := max(opts.Replicas, 1)
	cfg := jetstream.StreamConfig{
		Name:        opts.Stream,
		Description: "Kairo's event bus",
		Subjects:    []string{logSubj, logSubj + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		MaxAge:      opts.MaxAge,
		MaxBytes:    opts.MaxBytes,
		// A full stream refuses new events: dropping old ones would drop
		// what replay and deduplication stand on.
		Discard:    jetstream.DiscardNew,
		Duplicates: opts.DuplicateWindow,
		// A direct get may be answered by a replica that lags; with one
		// replica there is none, and it spares the leader's API.
		AllowDirect: replicas == 1,
	}
	if opts.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	return cfg
}

// drift is each difference between what the options set and the stream,
// as a sentence naming the setting, both values and how to apply it.
func drift(opts Config, logSubj string, cfg jetstream.StreamConfig) []string {
	var out []string
	differ := func(key, stream, want, edit string) {
		out = append(out, fmt.Sprintf("stream %s has %s %s, kairo.toml says %s: left as it is; `kairo store apply` applies kairo.toml (or nats stream edit %s %s)",
			opts.Stream, key, stream, want, opts.Stream, edit))
	}
	if opts.Replicas != 0 && opts.Replicas != cfg.Replicas {
		differ("replicas", fmt.Sprint(cfg.Replicas), fmt.Sprint(opts.Replicas), fmt.Sprintf("--replicas %d", opts.Replicas))
	}
	if opts.MaxBytes != 0 && opts.MaxBytes != cfg.MaxBytes {
		differ("max_bytes", bytesText(cfg.MaxBytes), bytesText(opts.MaxBytes), fmt.Sprintf("--max-bytes %d", opts.MaxBytes))
	}
	if opts.MaxAge != 0 && opts.MaxAge != cfg.MaxAge {
		differ("max_age", ageText(cfg.MaxAge), ageText(opts.MaxAge), "--max-age "+opts.MaxAge.String())
	}
	want := []string{logSubj, logSubj + ".>"}
	if got := slices.Sorted(slices.Values(cfg.Subjects)); !slices.Equal(got, want) {
		differ("subjects", strings.Join(cfg.Subjects, ", "), strings.Join(want, ", "), fmt.Sprintf("--subjects %s --subjects '%s.>'", logSubj, logSubj))
	}
	if cfg.Discard != jetstream.DiscardNew {
		// A full stream that drops its oldest events loses what replay
		// and deduplication stand on.
		differ("discard", "old", "new (a full stream refuses events, never drops stored ones)", "--discard new")
	}
	// Headers a host writes that act on what other hosts wrote: the
	// server carries them out whatever the host's permissions.
	if cfg.AllowRollup {
		out = append(out, fmt.Sprintf("stream %s allows Nats-Rollup headers: one host could purge what the others wrote; `kairo store apply` turns them off (or nats stream edit %s --no-allow-rollup)", opts.Stream, opts.Stream))
	}
	if cfg.AllowMsgSchedules {
		out = append(out, fmt.Sprintf("stream %s allows message schedules: the server publishes a scheduled message on the subject it names, which could be another host's; `kairo store apply` turns them off, or move the stream aside", opts.Stream))
	}
	return out
}

// applied is cfg with what the options set, and the list of what changed.
func applied(opts Config, cfg jetstream.StreamConfig) (jetstream.StreamConfig, []string) {
	var changes []string
	change := func(key, from, to string) {
		changes = append(changes, fmt.Sprintf("%s: %s → %s", key, from, to))
	}
	logSubj := opts.Prefix + ".log"
	if opts.Replicas != 0 && opts.Replicas != cfg.Replicas {
		change("replicas", fmt.Sprint(cfg.Replicas), fmt.Sprint(opts.Replicas))
		cfg.Replicas = opts.Replicas
		cfg.AllowDirect = opts.Replicas == 1 // as streamConfig chooses
	}
	if opts.MaxBytes != 0 && opts.MaxBytes != cfg.MaxBytes {
		change("max_bytes", bytesText(cfg.MaxBytes), bytesText(opts.MaxBytes))
		cfg.MaxBytes = opts.MaxBytes
	}
	if opts.MaxAge != 0 && opts.MaxAge != cfg.MaxAge {
		change("max_age", ageText(cfg.MaxAge), ageText(opts.MaxAge))
		cfg.MaxAge = opts.MaxAge
	}
	want := []string{logSubj, logSubj + ".>"}
	if got := slices.Sorted(slices.Values(cfg.Subjects)); !slices.Equal(got, want) {
		change("subjects", strings.Join(cfg.Subjects, ", "), strings.Join(want, ", "))
		cfg.Subjects = want
	}
	if cfg.Discard != jetstream.DiscardNew {
		change("discard", "old", "new")
		cfg.Discard = jetstream.DiscardNew
	}
	if cfg.AllowRollup {
		change("allow_rollup_hdrs", "true", "false")
		cfg.AllowRollup = false
	}
	if cfg.AllowMsgSchedules {
		change("allow_msg_schedules", "true", "false")
		cfg.AllowMsgSchedules = false
	}
	return cfg, changes
}

// Apply makes the stream what opts say: it creates it when there
// is none, else sets the replicas, max_bytes and max_age the options set
// (zero leaves a setting as it is), the store's subjects, discard new, and
// no rollup headers or message schedules, by which one host's message
// would act on the others'.
// It returns what it changed, one line each, or that it created the
// stream. An embedded store's server must not be running: Apply
// starts it, without listening, for the time of the change.
func Apply(ctx context.Context, opts Config) ([]string, error) {
	opts.Listen, opts.Peers, opts.AllowRemote = "", nil, false
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, logSubj: opts.Prefix + ".log", describe: describe(opts)}
	defer s.shut()
	if err := s.dial(ctx); err != nil {
		return nil, err
	}
	var out []string
	err := retryOpen(ctx, opts.Logger, "apply the settings of stream "+opts.Stream, min(opts.Timeout, opts.OpenTimeout), func(ctx context.Context) error {
		n := s.denied.count()
		st, err := s.js.Stream(ctx, opts.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			cfg := streamConfig(opts)
			if _, err := s.js.CreateStream(ctx, cfg); err != nil {
				return s.checkDenied(n, "create stream "+opts.Stream, err)
			}
			out = []string{fmt.Sprintf("created stream %s: subjects %s, replicas %d, max_bytes %s, max_age %s, discard new",
				opts.Stream, strings.Join(cfg.Subjects, ", "), cfg.Replicas, bytesText(cfg.MaxBytes), ageText(cfg.MaxAge))}
			return nil
		}
		if err != nil {
			return s.checkDenied(n, "look up stream "+opts.Stream, err)
		}
		cfg, changes := applied(opts, st.CachedInfo().Config)
		if len(changes) == 0 {
			out = nil
			return nil
		}
		if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
			return s.checkDenied(n, "update stream "+opts.Stream, err)
		}
		out = changes
		return nil
	})
	if err != nil {
		return nil, s.redact(fmt.Errorf("apply to %s: %w", s.describe, err))
	}
	return out, nil
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

// Drift is each setting of the options that differs from the stream the
// store found, as a sentence naming it, both values and the command that
// applies it; the stream was left as it is. A setting the options leave
// unset (zero) has no opinion and is not compared.
func (s *Store) Drift() []string { return slices.Clone(s.drift) }

// subjectCovers reports whether one of the patterns matches every subject
// that subject (a pattern itself) matches.
func subjectCovers(patterns []string, subject string) bool {
	want := strings.Split(subject, ".")
	for _, p := range patterns {
		have := strings.Split(p, ".")
		ok := true
		for i, t := range have {
			if t == ">" {
				break
			}
			if i >= len(want) || want[i] == ">" || (t != "*" && t != want[i]) || (t == "*" && want[i] == ">") {
				ok = false
				break
			}
			if i == len(have)-1 && len(want) != len(have) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func bytesText(n int64) string {
	if n <= 0 {
		return "none (no bound)"
	}
	for _, u := range []struct {
		unit string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

func ageText(d time.Duration) string {
	if d <= 0 {
		return "none (kept for good)"
	}
	return d.String()
}

// describe is what Describe says of a store of opts: the URL without its
// credentials.
func describe(opts Config) string {
	if opts.Embedded {
		return "jetstream embedded at " + opts.Dir
	}
	return "jetstream " + manifests.RedactURL(opts.URL) + " stream " + opts.Stream
}

// secrets are the passwords and tokens in a URL list.
func secrets(urls string) []string {
	var out []string
	for _, p := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw, url.QueryEscape(pw))
		} else if !ok && u.User.Username() != "" {
			out = append(out, u.User.Username())
		}
	}
	return out
}

// redactedError is an error whose text lost the credentials of a URL; it
// still unwraps to what it wraps.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact is err without the credentials of the store's URL, should a
// library have put them in its text.
func (s *Store) redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, secret := range secrets(s.opts.URL) {
		if strings.Contains(msg, secret) {
			msg, changed = strings.ReplaceAll(msg, secret, "xxxxx"), true
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// PeerPasswordFile is where an embedded server that listens keeps the
// password of the peer that joins it: DIR/peers/NAME.password.
func PeerPasswordFile(dir, peer string) string {
	return filepath.Join(dir, "peers", peer+".password")
}

// peerPassword is the password of peer, made at the first start (32 random
// bytes, base64url) and kept: mode 0600 in a 0700 folder, like the
// console's token. A file or folder others may read is refused: the
// password lets whoever holds it append as that peer.
func peerPassword(dir, peer string) (string, error) {
	folder := filepath.Dir(PeerPasswordFile(dir, peer))
	if err := os.Mkdir(folder, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("jetstream store: the peers' folder: %w", err)
	}
	fi, err := os.Lstat(folder)
	if err != nil {
		return "", fmt.Errorf("jetstream store: the peers' folder: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("jetstream store: %s is not a folder; move it aside, and the peers' passwords are made again", folder)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("jetstream store: the peers' folder %s is open to other users (mode %v): it holds their passwords; run chmod 700 %s", folder, fi.Mode().Perm(), folder)
	}
	path := PeerPasswordFile(dir, peer)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			f.Close()
			os.Remove(path)
			return "", err
		}
		pw := base64.RawURLEncoding.EncodeToString(b[:])
		_, werr := f.WriteString(pw + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return "", fmt.Errorf("jetstream store: write %s: %w", path, werr)
		}
		return pw, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("jetstream store: peer %s's password: %w", peer, err)
	}
	return ReadPasswordFile(path)
}

// ReadPasswordFile reads a password kept in a file of its own: a regular
// file, mode 0600 or narrower, its first line. A file others may read is
// refused with the chmod that mends it.
func ReadPasswordFile(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("password file %s is not a regular file; give the file itself", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("password file %s is open to other users (mode %v): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	if pw = strings.TrimSpace(pw); pw == "" {
		return "", fmt.Errorf("password file %s is empty; put the password on its first line", path)
	}
	return pw, nil
}
