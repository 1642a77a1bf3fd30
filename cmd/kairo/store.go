package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kairo-os/kairo/kernel/bus/sqlite"
	"github.com/kairo-os/kairo/manifests"
)

func runStore(ctx context.Context, args []string) error {
	sub := []command{
		{"check", "check every page and every event of the event store", runStoreCheck},
		{"salvage", "copy every readable event into a fresh store: kairo store salvage NEW.db", runStoreSalvage},
		{"apply", "apply kairo.toml's [store.jetstream] settings to the JetStream stream", runStoreApply},
		{"permissions", "print the nats-server permissions of a host on the stream: kairo store permissions HOST", runStorePermissions},
	}
	if len(args) == 0 {
		return &usageError{msg: "kairo store needs a command: check, salvage, apply or permissions", synopsis: "kairo store check | salvage NEW.db | apply | permissions HOST"}
	}
	return dispatch(ctx, sub, "kairo store", args)
}

// storeFile is the SQLite file of the data folder the flags name.
func storeFile(homeFlag, configFlag string) (string, error) {
	home, err := dataFolder(homeFlag)
	if err != nil {
		return "", err
	}
	cfg, err := loadConfig(home, configFlag)
	if err != nil {
		return "", err
	}
	if cfg.Store.Kind == manifests.StoreMemory {
		return "", errors.New("the event store is kept in memory ([store] kind = \"memory\"): there is no file to check")
	}
	if cfg.Store.Kind == manifests.StoreJetStream {
		return "", errors.New("the events are kept in a JetStream stream ([store] kind = \"jetstream\"): its server checks and repairs it (nats stream info, nats stream backup); kairo store check and salvage are for the SQLite file")
	}
	return cfg.StorePath(home), nil
}

// progressLine prints a check's progress on stderr, at most a few times a
// second, on one line a terminal rewrites.
func progressLine() sqlite.SalvageProgress {
	var last time.Time
	tty := isTerminal(int(os.Stderr.Fd()))
	return func(stage string, done, total uint64) {
		if done < total && time.Since(last) < 250*time.Millisecond {
			return
		}
		last = time.Now()
		pct := uint64(100)
		if total > 0 {
			pct = done * 100 / total
		}
		line := fmt.Sprintf("checking %s: %d%%", stage, pct)
		if stage == "events" {
			line = fmt.Sprintf("reading events: %d of %d (%d%%)", done, total, pct)
		}
		if tty {
			fmt.Fprintf(os.Stderr, "\r\033[K%s", line)
			if done >= total {
				fmt.Fprintln(os.Stderr)
			}
		} else if done >= total {
			fmt.Fprintln(os.Stderr, line)
		}
	}
}

func runStoreCheck(ctx context.Context, args []string) error {
	f := newFlags("store check", "kairo store check [--home DIR] [--config FILE]", `
Check the event store whole: SQLite's integrity check of every page, then
every event read and decoded, against what the data folder says the store
should hold (its identity, the sequence numbers handed out, whether the
daemon stopped cleanly). Prints what is readable and what is not, and
exits 1 if anything is wrong. It only reads: kairo up may be running.`)
	homeFlag := f.String("home", "", "the data folder `DIR` (default $KAIRO_HOME, else ./.kairo)")
	configFlag := f.String("config", "", "read `FILE` over the built-in defaults")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	path, err := storeFile(*homeFlag, *configFlag)
	if err != nil {
		return err
	}
	rep, err := sqlite.Check(ctx, path, progressLine())
	if err != nil {
		return fmt.Errorf("store check: %w", err)
	}
	fmt.Print(termText(rep.Summary()))
	if !rep.Sound() {
		return fmt.Errorf("the store at %s is damaged: `kairo store salvage NEW.db` copies what is readable into a fresh store", path)
	}
	return nil
}

func runStoreSalvage(ctx context.Context, args []string) error {
	f := newFlags("store salvage", "kairo store salvage [--home DIR] [--config FILE] NEW.db", `
Copy every readable event of the event store, with its sequence number,
into a fresh store at NEW.db, and report exactly what could not be read.
New events of the fresh store continue above every sequence number the
old one handed out, so none is given twice. Stop kairo up, then put the
fresh store in the old one's place as the report says.`)
	homeFlag := f.String("home", "", "the data folder `DIR` (default $KAIRO_HOME, else ./.kairo)")
	configFlag := f.String("config", "", "read `FILE` over the built-in defaults")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	path, err := storeFile(*homeFlag, *configFlag)
	if err != nil {
		return err
	}
	dst, err := filepath.Abs(pos[0])
	if err != nil {
		return err
	}
	rep, err := sqlite.Salvage(ctx, path, dst, progressLine())
	if err != nil {
		return fmt.Errorf("store salvage: %w", err)
	}
	fmt.Print(termText(rep.Summary()))
	fmt.Printf("salvaged %d events into %s\n", rep.Events, dst)
	fmt.Printf("to use it, with kairo up stopped:\n  mv %s %s && mv %s.state %s.state && rm -f %s-wal %s-shm\n", dst, path, dst, path, path, path)
	return nil
}
