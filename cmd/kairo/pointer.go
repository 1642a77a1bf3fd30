package main

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/client"
)

// The pointer: kairo up names its data folder in a file of its user's
// (client.PointerPath), so that a client started in another folder finds it
// (client.FindHome).

// foundHome is the data folder a client uses and how it was found.
type foundHome struct {
	dir     string // as found: relative for ./.kairo
	from    string // "KAIRO_HOME", "cwd" (./.kairo) or "pointer"
	pointer string // the pointer file, when from it
}

// clientHome finds the data folder of the kernel a client talks to.
func clientHome() foundHome {
	if os.Getenv("KAIRO_HOME") != "" {
		return foundHome{dir: os.Getenv("KAIRO_HOME"), from: "KAIRO_HOME"}
	}
	dir, pointer := client.FindHome(homeSocket)
	if pointer != "" {
		return foundHome{dir: dir, from: "pointer", pointer: pointer}
	}
	return foundHome{dir: dir, from: "cwd"}
}

// homeSocket is where a kernel on the data folder home listens, as kairo
// up works it out.
func homeSocket(home string) (string, error) {
	cfg, err := manifests.Load(filepath.Join(home, "kairo.toml"))
	if err != nil {
		return "", err
	}
	return cfg.SocketPath(home), nil
}

// writePointer names home, absolute, in the pointer file, and returns what
// removes it when the daemon stops cleanly. Without the pointer the daemon
// runs as well; clients in other folders do not find it.
func writePointer(home string, log *slog.Logger) (remove func()) {
	path := client.PointerPath()
	if path == "" {
		log.Debug("no folder for the pointer to the data folder: neither XDG_RUNTIME_DIR nor a cache folder is known")
		return func() {}
	}
	dir := filepath.Dir(path)
	// $XDG_RUNTIME_DIR is the login manager's to make: a missing one is
	// not made up. The cache folder may not exist yet.
	if os.Getenv("XDG_RUNTIME_DIR") == "" {
		os.MkdirAll(filepath.Dir(dir), 0o700)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		log.Debug("cannot make the pointer's folder: clients in other folders will not find this daemon", "err", err)
		return func() {}
	}
	// Its own entry first: should the pointer be taken over by a daemon
	// started later, clients still find this one, and that one hands the
	// pointer back when it stops.
	entry := client.DaemonEntry(path, home)
	if err := os.Mkdir(filepath.Dir(entry), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		log.Debug("cannot make the folder of the daemons' entries", "err", err)
	}
	if err := writeFileAtomic(entry, []byte(home+"\n")); err != nil {
		log.Debug("cannot name this daemon beside the pointer", "entry", entry, "err", err)
	}
	err := writeFileAtomic(path, []byte(home+"\n"))
	if err != nil {
		log.Warn("cannot write the pointer to the data folder: clients in other folders will not find this daemon", "pointer", path, "err", err)
		os.Remove(entry)
		return func() {}
	}
	return func() {
		os.Remove(entry)
		// Another daemon started since may have taken the pointer over;
		// when it is still this one's, it goes to the daemon that runs and
		// started last, if any.
		if h, err := client.ReadPointer(path); err != nil || h != home {
			return
		}
		if others := client.RunningHomes(path, homeSocket); len(others) > 0 {
			if err := writeFileAtomic(path, []byte(others[0]+"\n")); err == nil {
				return
			}
		}
		os.Remove(path)
	}
}

// writeFileAtomic replaces path with a file of b, mode 0600, so that a
// reader sees the old pointer or the new one, never half of one.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".current-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
