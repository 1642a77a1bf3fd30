package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/kernel/bus/jetstream"
	"github.com/kairo-os/kairo/manifests"
)

// runStoreApply makes the JetStream stream what kairo.toml says. A host
// never changes a stream that exists on its own (kairo up reports what
// differs); this is the operator's explicit step.
func runStoreApply(ctx context.Context, args []string) error {
	f := newFlags("store apply", "kairo store apply [--home DIR] [--config FILE]", `
Apply kairo.toml's [store.jetstream] settings to the JetStream stream:
replicas, max_bytes and max_age where kairo.toml sets them (a key left out
leaves the stream's value as it is), the subjects this Kairo appends on
(STREAM.log and STREAM.log.>), and discard new. Creates the stream when
there is none. Prints each change. kairo up never changes a stream that
exists: it warns of each difference and names this command.

For an embedded server, stop kairo up first: the server runs inside it.
On a cluster, the user of kairo.toml's credentials needs the permission
to update the stream, which the hosts' own users lack (kairo store
permissions); run it with an operator's credentials (--config).`)
	homeFlag := f.String("home", "", "the data folder `DIR` (default $KAIRO_HOME, else ./.kairo)")
	configFlag := f.String("config", "", "read `FILE` over the built-in defaults")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	home, err := dataFolder(*homeFlag)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(home, *configFlag)
	if err != nil {
		return err
	}
	if cfg.Store.Kind != manifests.StoreJetStream {
		return fmt.Errorf("the events are not kept in a JetStream stream ([store] kind = %q): kairo store apply is for kind = \"jetstream\"", cfg.Store.Kind)
	}
	if cfg.Store.JetStream.Embedded {
		lock, err := host.LockHome(home)
		if err != nil {
			return fmt.Errorf("the embedded JetStream server runs inside kairo up: stop it, then run kairo store apply (%w)", err)
		}
		defer lock.Close()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := jetstream.ConfigFor(&cfg, home, log)
	changes, err := jetstream.Apply(ctx, opts)
	if err != nil {
		return fmt.Errorf("store apply: %w", err)
	}
	stream := opts.Stream
	if stream == "" {
		stream = jetstream.DefaultStream
	}
	if len(changes) == 0 {
		fmt.Printf("stream %s has kairo.toml's settings already: nothing changed\n", stream)
		return nil
	}
	fmt.Printf("stream %s:\n", stream)
	for _, c := range changes {
		fmt.Printf("  %s\n", c)
	}
	return nil
}

// runStorePermissions prints what a host may do on the operator's own
// NATS server: the same permissions an embedded server gives its peers.
func runStorePermissions(ctx context.Context, args []string) error {
	f := newFlags("store permissions", "kairo store permissions [--home DIR] [--config FILE] HOST", `
Print the nats-server authorization block of the user for host HOST on
this Kairo's stream, to paste into the configuration of a cluster the
hosts share: HOST may append on its own subject (STREAM.log.HOST), read
the stream, and receive on its own inboxes (_INBOX_HOST.>, the prefix
kairo connects with), and nothing else: no other host's subject or
inboxes, no deleting or purging messages, no creating, changing or
deleting streams. Replace
PASSWORD with the host's password, which the host reads from its
[store.jetstream] password_file (user defaults to its [host] name).
An embedded server that listens gives each of its peers these
permissions itself.`)
	homeFlag := f.String("home", "", "the data folder `DIR` (default $KAIRO_HOME, else ./.kairo)")
	configFlag := f.String("config", "", "read `FILE` over the built-in defaults")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	home, err := dataFolder(*homeFlag)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(home, *configFlag)
	if err != nil {
		return err
	}
	name := pos[0]
	stream := cfg.Store.JetStream.Stream
	if stream == "" {
		stream = jetstream.DefaultStream
	}
	// The store's prefix is its stream's name (jetstream.Config.Prefix).
	if name == "" || strings.ContainsAny(name, "*>/\\ \t") || abi.ValidateSubject(stream+".log."+name) != nil {
		return &usageError{msg: fmt.Sprintf("%q is not a host name: letters, digits, \"-\", \"_\" and dots between them, as the host's [host] name", name), synopsis: f.synopsis}
	}
	fmt.Print(jetstream.HostPermissions(stream, stream, name).AuthorizationBlock(name, "PASSWORD"))
	return nil
}
