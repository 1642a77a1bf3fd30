package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/manifests"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kairo-os/kairo/abi"
)

// peerOptions are the options of host peer joining the embedded store
// that serves dir on addr, with the password made for it.
func peerOptions(dir, addr, peer string) Config {
	return Config{URL: "nats://" + addr, Host: peer, PasswordFile: PeerPasswordFile(dir, peer)}
}

// rawPeer is a bare NATS connection as peer, with the permission
// violations the server reports on it.
type rawPeer struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	mu     sync.Mutex
	denied []string
}

func dialPeer(t *testing.T, addr, user, password string) *rawPeer {
	t.Helper()
	p := &rawPeer{}
	nc, err := nats.Connect("nats://"+addr, nats.UserInfo(user, password), nats.CustomInboxPrefix(InboxPrefix(user)), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		p.mu.Lock()
		p.denied = append(p.denied, err.Error())
		p.mu.Unlock()
	}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	p.nc = nc
	p.js, _ = jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	return p
}

// refusal is the context of a request the server is expected to refuse:
// it answers none, so the request waits out its context. That wait proves
// nothing by itself — each refusal is also checked by the server's report
// of the violation (refusedOn) and by what the stream holds after — so it
// is short: a request the server wrongly allowed and answered late would
// still miss its violation report and fail the test.
func refusal(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// refusedOn waits for the server's permission violation naming subject.
func (p *rawPeer) refusedOn(t *testing.T, subject string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for _, d := range p.denied {
			if strings.Contains(d, "ermissions") && strings.Contains(d, subject) {
				p.mu.Unlock()
				return
			}
		}
		p.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("no permission violation on %s; the server reported %q", subject, p.denied)
}

func readPeerPassword(t *testing.T, dir, peer string) string {
	t.Helper()
	pw, err := ReadPasswordFile(PeerPasswordFile(dir, peer))
	if err != nil {
		t.Fatal(err)
	}
	return pw
}

// An embedded server that listens takes only its peers, each with its own
// password, and a peer appends only as itself: it reads the whole stream,
// and appends on its own subject, but the server refuses its publish on
// another host's subject, its deleting or purging a message, its changing
// or deleting the stream, and a consumer that would deliver onto the log.
// Each refusal beside the allowed neighbour that proves the peer works.
func TestJetStreamPeerPermissions(t *testing.T) {
	dir, addr := t.TempDir(), jsListenAddr(t)
	a := openJetStream(t, Config{Embedded: true, Dir: dir, Listen: addr, Host: "a", Peers: []string{"b", "c"}})
	defer a.Close()
	appendAs(t, a, "a", 0, 3)

	// The store of b opens with its password, appends, and a reads it.
	b := openJetStream(t, peerOptions(dir, addr, "b"))
	appendAs(t, b, "b", 3, 2)
	b.Close()
	appendAs(t, a, "a", 5, 1) // a reads what b appended before its own
	if got := len(bustest.ScanAll(t, a, bus.Query{})); got != 6 {
		t.Fatalf("a reads %d events, want the 4 it appended and the 2 of b", got)
	}

	ctx := bustest.Ctx(t)
	p := dialPeer(t, addr, "b", readPeerPassword(t, dir, "b"))
	st, err := p.js.Stream(ctx, DefaultStream)
	if err != nil {
		t.Fatalf("b looks up the stream: %v", err)
	}
	msgs := func() uint64 {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatalf("b reads the stream's info: %v", err)
		}
		return info.State.Msgs
	}
	before := msgs()

	// Its own subject: stored. Another host's: refused, nothing stored.
	if _, err := p.js.Publish(ctx, "KAIRO.log.b", []byte("own")); err != nil {
		t.Fatalf("b publishes on its own subject: %v", err)
	}
	for _, subject := range []string{"KAIRO.log.a", "KAIRO.log.c", "KAIRO.log", "KAIRO.log.b.x"} {
		if _, err := p.js.Publish(refusal(t), subject, []byte("forged")); err == nil {
			t.Errorf("b published on %s", subject)
		}
		p.refusedOn(t, subject)
	}
	// A rollup header on its own subject would purge the stream: the
	// stream Kairo made refuses it.
	if _, err := p.js.PublishMsg(ctx, &nats.Msg{Subject: "KAIRO.log.b", Header: nats.Header{"Nats-Rollup": []string{"all"}}, Data: []byte("purge")}); err == nil {
		t.Error("b published a rollup")
	}
	if got := msgs(); got != before+1 {
		t.Errorf("the stream holds %d messages, want %d: b's own one more, none of the forged", got, before+1)
	}

	// Reading a message: allowed. Deleting it, purging, editing or
	// deleting the stream: refused, and the message is still there.
	if _, err := st.GetMsg(ctx, 1); err != nil {
		t.Errorf("b reads message 1: %v", err)
	}
	if err := st.DeleteMsg(refusal(t), 1); err == nil {
		t.Error("b deleted message 1")
	}
	p.refusedOn(t, "$JS.API.STREAM.MSG.DELETE.KAIRO")
	if err := st.Purge(refusal(t)); err == nil {
		t.Error("b purged the stream")
	}
	p.refusedOn(t, "$JS.API.STREAM.PURGE.KAIRO")
	if _, err := p.js.UpdateStream(refusal(t), jetstream.StreamConfig{Name: "KAIRO", Subjects: []string{"KAIRO.log", "KAIRO.log.>"}, MaxBytes: 1024}); err == nil {
		t.Error("b updated the stream")
	}
	p.refusedOn(t, "$JS.API.STREAM.UPDATE.KAIRO")
	if err := p.js.DeleteStream(refusal(t), "KAIRO"); err == nil {
		t.Error("b deleted the stream")
	}
	p.refusedOn(t, "$JS.API.STREAM.DELETE.KAIRO")
	if _, err := p.js.CreateStream(refusal(t), jetstream.StreamConfig{Name: "MINE", Subjects: []string{"mine.>"}}); err == nil {
		t.Error("b created a stream")
	}
	p.refusedOn(t, "$JS.API.STREAM.CREATE.MINE")
	if raw, err := a.stream.GetMsg(ctx, 1); err != nil || raw.Sequence != 1 {
		t.Errorf("message 1 after b's refused delete: %v", err)
	}

	// An ordered consumer reads; a push consumer onto a's subject would
	// store again what it delivers, as a: the server refuses it.
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("b creates an ordered consumer: %v", err)
	}
	if m, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil || m.Subject() != "KAIRO.log.a" {
		t.Errorf("b's ordered consumer: %v", err)
	}
	// The server answers this one with its error: no refusal's short wait.
	if _, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "relay", DeliverSubject: "KAIRO.log.a"}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("b's consumer that delivers on a's subject: %v, want refused as a cycle", err)
	}
	if got := msgs(); got != before+1 {
		t.Errorf("the stream holds %d messages after b's reads, want %d", got, before+1)
	}

	// Its own inboxes: b subscribes. Another host's, or all: refused.
	if _, err := p.nc.SubscribeSync("_INBOX_b.x"); err != nil {
		t.Errorf("b subscribes to its own inbox: %v", err)
	}
	for _, subject := range []string{"_INBOX.>", "_INBOX_a.>", "_INBOX_c.x", "KAIRO.log.>"} {
		if _, err := p.nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		p.nc.Flush()
		p.refusedOn(t, fmt.Sprintf("Subscription to %q", subject))
	}
	p.mu.Lock()
	for _, d := range p.denied {
		if strings.Contains(d, "_INBOX_b.x") {
			t.Errorf("b's own inbox was refused: %s", d)
		}
	}
	p.mu.Unlock()

	// Credentials: c's password is not b's; none is no login; the control,
	// c's own, logs in.
	if _, err := nats.Connect("nats://"+addr, nats.UserInfo("b", readPeerPassword(t, dir, "c"))); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("b with c's password: %v, want an authorization violation", err)
	}
	if _, err := nats.Connect("nats://" + addr); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("no credentials: %v, want an authorization violation", err)
	}
	if _, err := nats.Connect("nats://"+addr, nats.UserInfo("a", "guess")); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("the host's own user from outside: %v, want an authorization violation", err)
	}
	dialPeer(t, addr, "c", readPeerPassword(t, dir, "c"))
}

// A store whose password the server refuses fails at once, not after
// open_timeout: trying again cannot mend credentials. The control: the
// right password, same timeout, opens.
func TestJetStreamBadPasswordNotRetried(t *testing.T) {
	dir, addr := t.TempDir(), jsListenAddr(t)
	a := openJetStream(t, Config{Embedded: true, Dir: dir, Listen: addr, Host: "a", Peers: []string{"b"}})
	defer a.Close()
	wrong := filepath.Join(t.TempDir(), "b.password")
	if err := os.WriteFile(wrong, []byte("not-it\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := peerOptions(dir, addr, "b")
	opts.PasswordFile, opts.OpenTimeout = wrong, time.Minute
	start := time.Now()
	_, err := Open(opts)
	if err == nil || !errors.Is(err, nats.ErrAuthorization) || time.Since(start) > 5*time.Second {
		t.Fatalf("a wrong password: %v after %v; want an authorization violation at once", err, time.Since(start))
	}
	opts = peerOptions(dir, addr, "b")
	opts.OpenTimeout = time.Minute
	openJetStream(t, opts).Close()
}

// Peer passwords are made once, 0600 in a 0700 folder, and kept; a file
// or folder others may read is refused with the chmod that mends it.
func TestJetStreamPeerPasswordFiles(t *testing.T) {
	dir, addr := t.TempDir(), jsListenAddr(t)
	opts := Config{Embedded: true, Dir: dir, Listen: addr, Host: "a", Peers: []string{"b"}}
	openJetStream(t, opts).Close()
	file := PeerPasswordFile(dir, "b")
	first := readPeerPassword(t, dir, "b")
	if len(first) != 43 { // 32 bytes, base64url without padding
		t.Errorf("the password %q is %d characters, want 43", first, len(first))
	}
	for path, want := range map[string]os.FileMode{file: 0o600, filepath.Dir(file): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", path, fi.Mode().Perm(), err, want)
		}
	}
	openJetStream(t, opts).Close()
	if again := readPeerPassword(t, dir, "b"); again != first {
		t.Errorf("a restart made a new password for b")
	}

	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(opts); err == nil || !strings.Contains(err.Error(), "chmod 600 "+file) {
		t.Errorf("a password file others may read: %v; want a refusal saying chmod 600", err)
	}
	os.Chmod(file, 0o600)
	if err := os.Chmod(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(opts); err == nil || !strings.Contains(err.Error(), "chmod 700 "+filepath.Dir(file)) {
		t.Errorf("a peers' folder others may read: %v; want a refusal saying chmod 700", err)
	}
	os.Chmod(filepath.Dir(file), 0o700)
	openJetStream(t, opts).Close()
}

// listen needs peers, a loopback address or allow_remote, and peers of
// host names; a url's user needs its password file.
func TestJetStreamListenOptions(t *testing.T) {
	addr := jsListenAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	for _, tc := range []struct {
		opts Config
		want string
	}{
		{Config{Embedded: true, Dir: "x", Listen: addr}, "peers = ["},
		{Config{Embedded: true, Dir: "x", Peers: []string{"b"}}, "give listen"},
		{Config{Embedded: true, Dir: "x", Listen: "0.0.0.0:" + port, Peers: []string{"b"}}, "allow_remote"},
		{Config{Embedded: true, Dir: "x", Listen: addr, Peers: []string{"b/c"}}, "not a host name"},
		{Config{Embedded: true, Dir: "x", Listen: addr, Peers: []string{"b*"}}, "not a host name"},
		{Config{Embedded: true, Dir: "x", Listen: addr, Host: "a", Peers: []string{"a"}}, "this host's own name"},
		{Config{Embedded: true, Dir: "x", Listen: addr, Peers: []string{"b", "b"}}, "named twice"},
		{Config{URL: "nats://h:4222", User: "b"}, "password_file"},
		{Config{URL: "nats://h:4222", PasswordFile: "p"}, "needs a user"},
		{Config{URL: "nats://u:p@h:4222", Host: "b", PasswordFile: "p"}, "one way to log in"},
	} {
		s, err := Open(tc.opts)
		if err == nil {
			s.Close()
			t.Errorf("OpenJetStream(%+v) opened", tc.opts)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenJetStream(%+v): %v; want it to say %q", tc.opts, err, tc.want)
		}
	}
	// The control: allow_remote serves every address.
	openJetStream(t, Config{Embedded: true, Dir: t.TempDir(), Listen: "0.0.0.0:" + port, AllowRemote: true, Peers: []string{"b"}}).Close()
}

// The block `kairo store permissions` prints, pasted into a nats-server's
// configuration, gives that host what an embedded server gives its peers:
// appending as itself, and no other host's subject.
func TestJetStreamPermissionsBlock(t *testing.T) {
	port := freePorts(t, 1)[0]
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream { store_dir: %q }\n", port, t.TempDir())
	conf += HostPermissions("KAIRO", "KAIRO", "b").AuthorizationBlock("b", "secret-b")
	conf = strings.Replace(conf, "  users = [\n", "  users = [\n    { user: \"admin\", password: \"admin\" }\n", 1)
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	so, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the printed block does not parse:\n%s\n%v", conf, err)
	}
	so.NoSigs, so.NoLog, so.MaxPayload = true, true, bus.MaxEventData+64<<10
	srv, err := server.NewServer(so)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// b, which may not create the stream, waits for it; the operator
	// (admin) makes it, and b appends as itself.
	pw := filepath.Join(t.TempDir(), "b.password")
	os.WriteFile(pw, []byte("secret-b\n"), 0o600)
	opened := make(chan error, 1)
	var b *Store
	go func() {
		var err error
		b, err = Open(Config{URL: "nats://" + addr, Host: "b", PasswordFile: pw, Timeout: 500 * time.Millisecond})
		opened <- err
	}()
	time.Sleep(time.Second)
	admin := openJetStream(t, Config{URL: "nats://admin:admin@" + addr, Host: "a"})
	defer admin.Close()
	appendAs(t, admin, "a", 0, 2)
	if err := <-opened; err != nil {
		t.Fatalf("b, waiting for the stream: %v", err)
	}
	appendAs(t, b, "b", 2, 2)
	b.Close()
	// A stream b has no permissions on is refused at once, saying so.
	start := time.Now()
	_, err = Open(Config{URL: "nats://" + addr, Host: "b", PasswordFile: pw, Stream: "OTHER", Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "not permitted") || !strings.Contains(err.Error(), "kairo store permissions") || time.Since(start) > 5*time.Second {
		t.Errorf("b on a stream it has no permissions on: %v after %v", err, time.Since(start))
	}
	p := dialPeer(t, addr, "b", "secret-b")
	if _, err := p.js.Publish(refusal(t), "KAIRO.log.a", []byte("forged")); err == nil {
		t.Error("b published on a's subject")
	}
	p.refusedOn(t, "KAIRO.log.a")
	appendAs(t, admin, "a", 4, 1)
	if got := len(bustest.ScanAll(t, admin, bus.Query{})); got != 5 {
		t.Errorf("the stream holds %d events, want 5", got)
	}
}

// A host never changes a stream that exists: what its options set
// differently is reported, with the command that applies it, and
// Apply applies it. Settings left unset have no opinion.
func TestJetStreamDriftAndApply(t *testing.T) {
	dir := t.TempDir()
	opts := Config{Embedded: true, Dir: dir, MaxBytes: 1 << 20, MaxAge: time.Hour}
	s := openJetStream(t, opts)
	bustest.AppendN(t, s, 0, 3)
	if d := s.Drift(); len(d) != 0 {
		t.Errorf("a stream just created drifts: %q", d)
	}
	s.Close()

	config := func() jetstream.StreamConfig {
		s := openJetStream(t, Config{Embedded: true, Dir: dir})
		defer s.Close()
		if d := s.Drift(); len(d) != 0 {
			t.Errorf("options that set nothing drift: %q", d)
		}
		return s.stream.CachedInfo().Config
	}
	// Default options keep the stream's bound and age.
	if cfg := config(); cfg.MaxBytes != 1<<20 || cfg.MaxAge != time.Hour {
		t.Fatalf("a host of default settings changed the stream: max_bytes %d, max_age %v", cfg.MaxBytes, cfg.MaxAge)
	}

	opts.MaxBytes, opts.MaxAge = 2<<20, 2*time.Hour
	s = openJetStream(t, opts)
	d := strings.Join(s.Drift(), "\n")
	s.Close()
	for _, want := range []string{"max_bytes 1MiB, kairo.toml says 2MiB", "max_age 1h0m0s, kairo.toml says 2h0m0s", "kairo store apply", "nats stream edit KAIRO --max-bytes 2097152"} {
		if !strings.Contains(d, want) {
			t.Errorf("the drift %q does not say %q", d, want)
		}
	}
	if cfg := config(); cfg.MaxBytes != 1<<20 {
		t.Fatalf("a host that drifts changed the stream: max_bytes %d", cfg.MaxBytes)
	}

	changes, err := Apply(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(changes, "\n"); !strings.Contains(got, "max_bytes: 1MiB → 2MiB") || !strings.Contains(got, "max_age: 1h0m0s → 2h0m0s") {
		t.Errorf("apply says %q", got)
	}
	if cfg := config(); cfg.MaxBytes != 2<<20 || cfg.MaxAge != 2*time.Hour {
		t.Fatalf("after apply: max_bytes %d, max_age %v", cfg.MaxBytes, cfg.MaxAge)
	}
	s = openJetStream(t, opts)
	if d := s.Drift(); len(d) != 0 {
		t.Errorf("after apply the stream still drifts: %q", d)
	}
	if got := len(bustest.ScanAll(t, s, bus.Query{})); got != 3 {
		t.Errorf("after apply the stream holds %d events, want 3", got)
	}
	s.Close()
	if changes, err := Apply(context.Background(), opts); err != nil || len(changes) != 0 {
		t.Errorf("apply again: %q, %v; want nothing to change", changes, err)
	}
	// A stream that lets a host's header purge the others' messages is
	// reported, and apply turns it off.
	s = openJetStream(t, opts)
	cfg := s.stream.CachedInfo().Config
	cfg.AllowRollup = true
	if _, err := s.js.UpdateStream(bustest.Ctx(t), cfg); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openJetStream(t, opts)
	if d := strings.Join(s.Drift(), "\n"); !strings.Contains(d, "Nats-Rollup") || !strings.Contains(d, "kairo store apply") {
		t.Errorf("a stream that allows rollups: drift %q", d)
	}
	s.Close()
	if changes, err := Apply(context.Background(), opts); err != nil || strings.Join(changes, "\n") != "allow_rollup_hdrs: true → false" {
		t.Errorf("apply to a stream that allows rollups: %q, %v", changes, err)
	}
	if cfg := config(); cfg.AllowRollup {
		t.Error("after apply the stream still allows rollups")
	}

	// On no stream, apply creates it.
	fresh := Config{Embedded: true, Dir: t.TempDir(), Stream: "FRESH"}
	if changes, err := Apply(context.Background(), fresh); err != nil || len(changes) != 1 || !strings.Contains(changes[0], "created stream FRESH") {
		t.Errorf("apply on no stream: %q, %v", changes, err)
	}
}

// A stream whose subjects lack PREFIX.log.> (made by the Kairo before)
// cannot take a named host's messages: the store refuses to open, naming
// kairo store apply, which mends it. The control: a host of no name, whose
// subject is PREFIX.log, opens it and is told of the difference.
func TestJetStreamOldSubjects(t *testing.T) {
	dir := t.TempDir()
	s := openJetStream(t, Config{Embedded: true, Dir: dir, Stream: "OTHER"})
	ctx := bustest.Ctx(t)
	if _, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "NARROW", Subjects: []string{"NARROW.log"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	unnamed := openJetStream(t, Config{Embedded: true, Dir: dir, Stream: "NARROW"})
	if d := strings.Join(unnamed.Drift(), "\n"); !strings.Contains(d, "subjects") {
		t.Errorf("a host of no name on the old stream is not told of its subjects: %q", d)
	}
	unnamed.Close()
	opts := Config{Embedded: true, Dir: dir, Stream: "NARROW", Host: "b"}
	_, err := Open(opts)
	if err == nil {
		t.Fatal("a stream without NARROW.log.> opened for host b")
	}
	for _, want := range []string{"NARROW.log.b", "kairo store apply", "nats stream edit NARROW"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	changes, err := Apply(ctx, opts)
	// The stream was made with JetStream's defaults: discard old too.
	if got := strings.Join(changes, "\n"); err != nil || got != "subjects: NARROW.log → NARROW.log, NARROW.log.>\ndiscard: old → new" {
		t.Fatalf("apply: %q, %v", changes, err)
	}
	openJetStream(t, opts).Close()
}

// Credentials in a URL are never shown: not by Describe, not in the error
// of an open that failed.
func TestJetStreamRedactsURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:secret@h:4222":                   "nats://u:xxxxx@h:4222",
		"nats://tok@h:4222":                        "nats://xxxxx@h:4222",
		"nats://h:4222":                            "nats://h:4222",
		"nats://u:s1@a:4222, tls://v:s2@b:4222":    "nats://u:xxxxx@a:4222,tls://v:xxxxx@b:4222",
		"nats://u:p%40ss@h:4222":                   "nats://u:xxxxx@h:4222",
		"nats://u:sec ret@h:4222/%zz":              "xxxxx@h:4222/%zz",
		"nats://h1:4222,nats://u:secret@h2:4222":   "nats://h1:4222,nats://u:xxxxx@h2:4222",
		"nats://user:secret@[::1]:4222":            "nats://user:xxxxx@[::1]:4222",
		"nats://user:secret@127.0.0.1:4222/?x=yes": "nats://user:xxxxx@127.0.0.1:4222/?x=yes",
	} {
		if got := manifests.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}

	port := freePorts(t, 1)[0]
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: []*server.User{{Username: "u", Password: "hunter2-secret"}}, MaxPayload: bus.MaxEventData + 64<<10})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	s := openJetStream(t, Config{URL: fmt.Sprintf("nats://u:hunter2-secret@127.0.0.1:%d", port)})
	if got := s.Describe(); strings.Contains(got, "hunter2") || !strings.Contains(got, "u:xxxxx@127.0.0.1") {
		t.Errorf("Describe = %q", got)
	}
	s.Close()
	for _, url := range []string{
		fmt.Sprintf("nats://u:wrong-secret@127.0.0.1:%d", port),               // refused
		fmt.Sprintf("nats://u:wrong-secret@127.0.0.1:%d", freePorts(t, 1)[0]), // nobody there
	} {
		_, err := Open(Config{URL: url, OpenTimeout: 300 * time.Millisecond, Timeout: 100 * time.Millisecond})
		if err == nil || strings.Contains(err.Error(), "wrong-secret") || !strings.Contains(err.Error(), "u:xxxxx@") {
			t.Errorf("the failed open of %s: %v", manifests.RedactURL(url), err)
		}
	}
}

// Two hosts started together on a fresh three-node cluster both open, the
// one that loses the race to create the stream finding it made; while the
// cluster has no leader, each retry is logged.
func TestClusterOpenTogether(t *testing.T) {
	ports := freePorts(t, 6)
	c := &testCluster{t: t, streams: map[string]string{}}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i]))
	}
	for i := range c.opts {
		o, err := server.ProcessConfigFile(writeConf(t, fmt.Sprintf(`
server_name: n%d
listen: 127.0.0.1:%d
max_payload: %d
jetstream { store_dir: %q }
cluster { name: kairo-test, listen: 127.0.0.1:%d, routes: [%s] }
`, i, ports[i], bus.MaxEventData+64<<10, filepath.Join(t.TempDir(), fmt.Sprint(i)), ports[3+i], strings.Join(routes, ", "))))
		if err != nil {
			t.Fatal(err)
		}
		o.NoSigs, o.NoLog = true, true
		c.opts[i] = o
	}
	t.Cleanup(c.shutdown)

	var logs syncLog
	stores := make([]*Store, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, host := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(Config{URL: c.url(), Host: host, Replicas: 3, Timeout: 2 * time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		}()
	}
	// The hosts start first: the cluster is not even up.
	time.Sleep(300 * time.Millisecond)
	for i := range c.nodes {
		c.start(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	if !strings.Contains(logs.String(), "trying again") {
		t.Errorf("no retry was logged:\n%s", logs.String())
	}
	appendAs(t, stores[0], "a", 0, 2)
	appendAs(t, stores[1], "b", 2, 2)
	appendAs(t, stores[0], "a", 4, 1)
	if got := len(bustest.ScanAll(t, stores[0], bus.Query{})); got != 5 {
		t.Errorf("host a reads %d events, want 5", got)
	}
	if info := stores[1].stream.CachedInfo(); info.Config.Replicas != 3 {
		t.Errorf("the stream has %d replicas, want 3", info.Config.Replicas)
	}
}

func writeConf(t *testing.T, text string) string {
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// syncLog is a log buffer several goroutines write.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// appendAs appends n events of host, ids from from on.
func appendAs(t testing.TB, s bus.Store, host string, from, n int) {
	t.Helper()
	var evs []*abi.Event
	for i := from; i < from+n; i++ {
		ev := bustest.StoreEvent(t, fmt.Sprintf("ev-%d", i), i)
		ev.Host = host
		evs = append(evs, ev)
	}
	bustest.AppendOrFail(t, s, evs, true)
}

// plainServer is a nats-server with JetStream on loopback, taking any
// client, stopped at the end of the test; its address.
func plainServer(t testing.TB) string {
	t.Helper()
	port := freePorts(t, 1)[0]
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true, MaxPayload: bus.MaxEventData + 64<<10})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the nats-server was not ready within 10 s")
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// applyJetStream applies opts to their stream, as `kairo store apply`
// does: a host's own open leaves a stream that exists as it is.
func applyJetStream(t testing.TB, opts Config) {
	t.Helper()
	if _, err := Apply(context.Background(), opts); err != nil {
		t.Fatalf("ApplyJetStream(%+v): %v", opts, err)
	}
}
