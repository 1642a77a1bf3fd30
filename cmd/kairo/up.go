package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/client"

	"github.com/kairo-os/kairo/kernel/secrets"
)

func runUp(ctx context.Context, args []string) error {
	started := time.Now()
	f := newFlags("up", "kairo up [--config FILE] [--home DIR] [--log-format text|json] [-v]", `
Run Kairo in the foreground: open the event store, listen on the Unix
socket, load the plugins, start the agent, and serve until SIGINT or
SIGTERM, then stop cleanly (exit 0). With a terminal on stdin, a chat with
the agent opens there (as kairo chat).

The data folder is --home, else $KAIRO_HOME, else ./.kairo; it is created
with mode 0700 and holds events.db, kernel.sock, kairo.lock, watchdog.lock (as
root) and, optionally, kairo.toml. One daemon at a time runs on a data folder.

The log goes to kairo.log in the data folder (at 10 MiB it becomes
kairo.log.1, replacing the one before). On a terminal, kairo up shows a
line as it starts, the chat, and the warnings and errors, a short line
each. With --log-format or -v, or when stderr is not a terminal, stderr
gets the structured log instead, as the file does.`)
	configFlag := f.String("config", "", "read `FILE` over the built-in defaults (default: kairo.toml in the data folder, if it exists)")
	homeFlag := f.String("home", "", "the data folder `DIR` (default $KAIRO_HOME, else ./.kairo)")
	logFormat := f.String("log-format", "", "write the log to stderr too, as `FORMAT`: text or json (default: text when stderr is not a terminal)")
	verbose := f.Bool("v", false, "write the log to stderr too, as text (--log-format text)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	switch *logFormat {
	case "", "text", "json":
	default:
		return &usageError{msg: fmt.Sprintf("--log-format %q: give text or json", *logFormat), synopsis: f.synopsis}
	}
	if *verbose && *logFormat == "" {
		*logFormat = "text"
	}
	con := upConsole(logFormat)
	if con != nil {
		defer con.clearStatus() // before an error is printed
	}
	home, lock, cfg, err := openHome(*homeFlag, *configFlag)
	if err != nil {
		return err
	}
	level, _ := cfg.Log.SlogLevel() // validated by Load
	logPath := filepath.Join(home, "kairo.log")
	// The secrets the daemon gives are masked in its log as on its bus.
	mask := secrets.NewMasker()
	log, logFile := openLog(logConfig{Level: level, Format: *logFormat, File: logPath, Human: con, Mask: mask})
	if logFile != nil {
		defer logFile.Close()
	}
	stopProfile, err := startCPUProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	// Orphans of killed process trees come to the daemon, which reaps
	// them: a container's PID 1 often does not.
	if stopReaper, err := proc.Subreaper(); err != nil {
		log.Warn("cannot reap orphaned processes; killed trees may leave zombies", "err", err)
	} else {
		defer stopReaper()
	}
	d := host.New(host.Config{Home: home, Config: cfg, Logger: log, Version: version, Lock: lock, Progress: con.progress, Masker: mask})
	if err := d.Start(); err != nil {
		// A setting the running daemon refused (a policy no plugin
		// provides) is placed in the file, as Load places its own.
		var bad *manifests.Error
		if errors.As(err, &bad) {
			manifests.Locate(bad, configPath(home, *configFlag))
		}
		return err
	}
	defer d.Stop(context.Background()) // on a return before the clean stop below; then a no-op
	if con != nil {
		con.line(upLine(started, home, logPath, logFile != nil, d.Plugins()))
	}
	defer writePointer(home, log)() // clients in other folders find it; gone on a clean stop
	scr := startChat(ctx, con, d.Socket(), *logFormat != "", log)
	return serveUntilStopped(ctx, d, con, scr, log)
}

// upConsole is the short console a person at a terminal sees, and nil when
// stderr gets the structured log: when it is not a terminal, or the person
// asked for the log (*logFormat, which it then sets to text when unset).
func upConsole(logFormat *string) *console {
	fd := int(os.Stderr.Fd())
	if !isTerminal(fd) && *logFormat == "" {
		*logFormat = "text"
	}
	if *logFormat != "" {
		return nil
	}
	cols, _, _ := termSize(fd)
	con := newConsole(os.Stderr, int(cols))
	con.setStatus("kairo: starting…")
	return con
}

// openHome makes the data folder, takes its lock and reads its
// configuration.
func openHome(homeFlag, configFlag string) (string, *os.File, manifests.Config, error) {
	home, err := dataFolder(homeFlag)
	if err != nil {
		return "", nil, manifests.Config{}, err
	}
	// Everything the daemon creates — the store and its WAL, the lock —
	// is for its owner only.
	syscall.Umask(0o077)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", nil, manifests.Config{}, fmt.Errorf("create the data folder: %w", err)
	}
	// The lock first: a second kairo up on this home writes nothing to it.
	lock, err := host.LockHome(home)
	if err != nil {
		return "", nil, manifests.Config{}, err
	}
	cfg, err := loadConfig(home, configFlag)
	if err != nil {
		lock.Close()
		return "", nil, manifests.Config{}, err
	}
	return home, lock, cfg, nil
}

// startCPUProfile profiles the daemon until stop when KAIRO_CPUPROFILE
// names a file, for `go tool pprof`.
func startCPUProfile() (stop func(), err error) {
	path := os.Getenv("KAIRO_CPUPROFILE")
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("KAIRO_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("KAIRO_CPUPROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// progress shows a step of the daemon's start on the status line; nil when
// there is no console.
func (c *console) progress(p host.Progress) {
	if c == nil {
		return
	}
	switch p.Step {
	case host.StepPlugins:
		c.setStatus(pluginsStatus(p.Folders, p.Cache))
	case host.StepAgent:
		c.setStatus("kairo: starting the agent…")
	}
}

// startChat opens the chat with the agent on stdin when it is a terminal,
// and returns its screen; nil when stdin is not a terminal. plain: log
// lines come between the chat's, so its line is never redrawn in place.
func startChat(ctx context.Context, con *console, socket string, plain bool, log *slog.Logger) *screen {
	if !isTerminal(int(os.Stdin.Fd())) {
		return nil
	}
	const talk = "Talk to the agent here (\"help\" lists what it understands); Ctrl-D ends the chat, Ctrl-C stops kairo."
	scr := stdoutScreen()
	if plain {
		scr.mode = progressPlain
	}
	if con != nil {
		scr.line(talk)
		con.attach(scr) // warnings print above the prompt
	} else {
		fmt.Fprintln(os.Stderr, "kairo: up. "+talk)
	}
	go func() { // ends with stdin or ctx; the daemon serves on after Ctrl-D
		err := chat(ctx, os.Stdin, scr, socket, "")
		if con != nil {
			con.attach(nil)
		}
		if err != nil {
			log.Warn("the terminal chat ended", "err", err)
		}
	}()
	return scr
}

// serveUntilStopped serves until ctx ends (a signal) or the socket server
// fails, then stops the daemon cleanly.
func serveUntilStopped(ctx context.Context, d *host.Daemon, con *console, scr *screen, log *slog.Logger) error {
	var serveErr error
	select {
	case <-ctx.Done():
		// A second signal kills at once, should the clean stop hang.
		signal.Reset(syscall.SIGINT, syscall.SIGTERM)
		log.Info("stopping; a second signal kills", "reason", context.Cause(ctx))
		if con != nil {
			con.attach(nil)
			if scr != nil {
				scr.end() // the prompt's line, before the chat ends
			}
			con.line("kairo: stopping… (a second Ctrl-C kills it)")
		}
	case serveErr = <-d.Failed():
		log.Error("the socket server failed; stopping", "err", serveErr)
	}
	if err := d.Stop(context.Background()); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "kairo: stopped")
	return serveErr
}

// dataFolder is the absolute path of the data folder: flag, else
// $KAIRO_HOME, else ./.kairo.
func dataFolder(flag string) (string, error) {
	if flag == "" {
		flag = client.Home()
	}
	return filepath.Abs(flag)
}

// loadConfig reads the configuration: the file --config names, which must
// exist, else kairo.toml in the data folder, if it exists; over the
// built-in defaults.
func loadConfig(home, flag string) (manifests.Config, error) {
	if flag != "" {
		if _, err := os.Stat(flag); err != nil {
			return manifests.Config{}, fmt.Errorf("--config: %w", err)
		}
	}
	return manifests.Load(configPath(home, flag))
}

// configPath is the configuration file loadConfig reads.
func configPath(home, flag string) string {
	if flag == "" {
		return filepath.Join(home, "kairo.toml")
	}
	return flag
}
