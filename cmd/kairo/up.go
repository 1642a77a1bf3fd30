package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/client"
)

func runUp(ctx context.Context, args []string) error {
	f := newFlags("up", "kairo up [--config FILE] [--home DIR] [--log-format text|json] [-v]", `
Run Kairo in the foreground: open the event store, listen on the Unix
socket, load the plugins, start the agent, and serve until SIGINT or
SIGTERM, then stop cleanly (exit 0). With a terminal on stdin, a chat with
the agent opens there (as kairo chat).

The data folder is --home, else $KAIRO_HOME, else ./.kairo; it is created
with mode 0700 and holds events.db, kernel.sock, kairo.lock and, optionally,
kairo.toml. One daemon at a time runs on a data folder.

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
	started := time.Now()
	switch *logFormat {
	case "", "text", "json":
	default:
		return &usageError{msg: fmt.Sprintf("--log-format %q: give text or json", *logFormat), synopsis: f.synopsis}
	}
	if *verbose && *logFormat == "" {
		*logFormat = "text"
	}
	// A person at a terminal sees a short start and the chat; anything
	// else reading stderr, or one who asked for it, the structured log.
	var con *console
	if fd := int(os.Stderr.Fd()); !isTerminal(fd) && *logFormat == "" {
		*logFormat = "text"
	} else if *logFormat == "" {
		cols, _, _ := termSize(fd)
		con = newConsole(os.Stderr, int(cols))
		con.setStatus("kairo: starting…")
		defer con.clearStatus() // before an error is printed
	}

	home, err := dataFolder(*homeFlag)
	if err != nil {
		return err
	}
	// Everything the daemon creates — the store and its WAL, the lock —
	// is for its owner only.
	syscall.Umask(0o077)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create the data folder: %w", err)
	}
	// The lock first: a second kairo up on this home writes nothing to it.
	lock, err := host.LockHome(home)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(home, *configFlag)
	if err != nil {
		return err
	}
	level, _ := cfg.Log.SlogLevel() // validated by Load
	logPath := filepath.Join(home, "kairo.log")
	log, logFile := openLog(logOptions{Level: level, Format: *logFormat, File: logPath, Human: con})
	if logFile != nil {
		defer logFile.Close()
	}

	// KAIRO_CPUPROFILE=FILE profiles the daemon until it stops, for
	// `go tool pprof`.
	if path := os.Getenv("KAIRO_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("KAIRO_CPUPROFILE: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("KAIRO_CPUPROFILE: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	// Orphans of killed process trees come to the daemon, which reaps
	// them: a container's PID 1 often does not.
	if stopReaper, err := proc.Subreaper(); err != nil {
		log.Warn("cannot reap orphaned processes; killed trees may leave zombies", "err", err)
	} else {
		defer stopReaper()
	}
	dcfg := host.Config{Home: home, Config: cfg, Logger: log, Version: version, Lock: lock}
	if con != nil {
		dcfg.Progress = func(p host.Progress) {
			switch p.Step {
			case host.StepPlugins:
				con.setStatus(pluginsStatus(p.Folders, p.Cache))
			case host.StepAgent:
				con.setStatus("kairo: starting the agent…")
			}
		}
	}
	d := host.New(dcfg)
	if err := d.Start(); err != nil {
		return err
	}
	defer d.Stop(context.Background()) // on a return before the clean stop below; then a no-op
	if con != nil {
		running, total := 0, 0
		for _, p := range d.Plugins() {
			total++
			if p.State == abi.PluginRunning {
				running++
			}
		}
		con.line(upLine(started, home, logPath, logFile != nil, running, total))
	}
	defer writePointer(home, log)() // clients in other folders find it; gone on a clean stop
	// With a terminal on stdin, the person at it talks to the agent there.
	var scr *screen
	if isTerminal(int(os.Stdin.Fd())) {
		const talk = "Talk to the agent here (\"help\" lists what it understands); Ctrl-D ends the chat, Ctrl-C stops kairo."
		scr = stdoutScreen()
		if *logFormat != "" {
			// Log lines come between: a line redrawn in place would
			// overwrite them.
			scr.mode = progressPlain
		}
		if con != nil {
			scr.line(talk)
			con.attach(scr) // warnings print above the prompt
		} else {
			fmt.Fprintln(os.Stderr, "kairo: up. "+talk)
		}
		go func() { // ends with stdin or ctx; the daemon serves on after Ctrl-D
			err := chat(ctx, os.Stdin, scr, d.Socket())
			if con != nil {
				con.attach(nil)
			}
			if err != nil {
				log.Warn("the terminal chat ended", "err", err)
			}
		}()
	}
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
	path := flag
	if path == "" {
		path = filepath.Join(home, "kairo.toml")
	} else if _, err := os.Stat(path); err != nil {
		return manifests.Config{}, fmt.Errorf("--config: %w", err)
	}
	return manifests.Load(path)
}
