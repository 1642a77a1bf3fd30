package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// SocketPath is the socket a client dials: $KAIRO_SOCKET, else
// kernel.sock in the data folder [FindHome] finds.
func SocketPath() string {
	if p := os.Getenv("KAIRO_SOCKET"); p != "" {
		return p
	}
	home, _ := FindHome(nil)
	return filepath.Join(home, "kernel.sock")
}

// Home is the data folder kairo up runs on: $KAIRO_HOME, else ./.kairo.
// A client looks further: [FindHome].
func Home() string {
	if h := os.Getenv("KAIRO_HOME"); h != "" {
		return h
	}
	return ".kairo"
}

// FindHome is the data folder a client uses, so that it finds the kernel
// its user started from whatever folder it runs in: $KAIRO_HOME; else
// ./.kairo when a kernel listens there; else the folder the user's running
// kernel named in the pointer file ([PointerPath]) when a kernel listens
// there; else ./.kairo. pointer is the pointer file when the folder came
// from it. socketOf is where a kernel on a data folder listens; nil means
// kernel.sock in it.
func FindHome(socketOf func(home string) (string, error)) (home, pointer string) {
	if h := os.Getenv("KAIRO_HOME"); h != "" {
		return h, ""
	}
	const here = ".kairo"
	if listens(socketOf, here) {
		return here, ""
	}
	if path := PointerPath(); path != "" {
		if h, err := ReadPointer(path); err == nil && listens(socketOf, h) {
			return h, path
		}
		// The pointer names a daemon that is gone: another that runs
		// named itself beside it.
		if hs := RunningHomes(path, socketOf); len(hs) > 0 {
			return hs[0], DaemonEntry(path, hs[0])
		}
	}
	return here, ""
}

// DaemonsDir is the folder beside the pointer file at pointer where each
// running daemon names its data folder in a file of its own
// ([DaemonEntry]), so that a client still finds one when the daemon the
// pointer names has stopped, and a daemon that stops hands the pointer to
// one that runs.
func DaemonsDir(pointer string) string { return filepath.Join(filepath.Dir(pointer), "daemons") }

// DaemonEntry is the file in [DaemonsDir] in which the daemon on the data
// folder home names it.
func DaemonEntry(pointer, home string) string {
	sum := sha256.Sum256([]byte(home))
	return filepath.Join(DaemonsDir(pointer), hex.EncodeToString(sum[:8]))
}

// maxDaemonEntries bounds the entries a client reads.
const maxDaemonEntries = 64

// daemonEntries lists the entry files beside pointer, the most recently
// written first; at most maxDaemonEntries.
func daemonEntries(pointer string) []string {
	dir := DaemonsDir(pointer)
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type entry struct {
		path string
		mod  time.Time
	}
	var es []entry
	for _, de := range des {
		if len(es) == maxDaemonEntries {
			break
		}
		if fi, err := de.Info(); err == nil && fi.Mode().IsRegular() && !strings.HasPrefix(de.Name(), ".") {
			es = append(es, entry{filepath.Join(dir, de.Name()), fi.ModTime()})
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].mod.After(es[j].mod) })
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.path
	}
	return out
}

// RunningHomes lists the data folders whose daemons named themselves
// beside the pointer at pointer ([DaemonsDir]) and whose kernels listen,
// the most recently started first. socketOf is as [FindHome]'s (nil:
// kernel.sock in the folder).
func RunningHomes(pointer string, socketOf func(home string) (string, error)) []string {
	// The entries are followed only in a folder nobody else may change,
	// as the pointer is.
	dir := filepath.Dir(pointer)
	if fi, err := os.Lstat(dir); err != nil || ownOnly(dir, fi, true) != nil {
		return nil
	}
	var out []string
	for _, e := range daemonEntries(pointer) {
		if h, err := ReadPointer(e); err == nil && listens(socketOf, h) {
			out = append(out, h)
		}
	}
	return out
}

// listens reports whether a kernel listens on the socket of the data
// folder home; socketOf finds it, nil meaning kernel.sock in home.
func listens(socketOf func(home string) (string, error), home string) bool {
	sock := filepath.Join(home, "kernel.sock")
	if socketOf != nil {
		var err error
		if sock, err = socketOf(home); err != nil {
			return false
		}
	}
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// PointerPath is the file in which a running kernel names its data folder
// for the clients of its user: $XDG_RUNTIME_DIR/kairo/current, else
// kairo/current in the user's cache folder; "" when neither is known.
// XDG_RUNTIME_DIR is the user's own, private, and emptied at logout; where
// it is unset (a container, a service) the cache folder is the user's own
// too, unlike /tmp, where another user may make the folder first. A
// pointer a crash left names a socket nobody listens on, and is passed
// over.
func PointerPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "kairo", "current")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "kairo", "current")
	}
	return ""
}

// maxPointer bounds the pointer file: a path, and a newline.
const maxPointer = 4096

// ReadPointer returns the data folder the pointer file at path names. It
// refuses a pointer that another user could have written: the file and its
// folder must be this user's, writable by nobody else, and the file a
// regular one, not a link.
func ReadPointer(path string) (string, error) {
	dir := filepath.Dir(path)
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if err := ownOnly(dir, fi, true); err != nil {
		return "", err
	}
	// O_NONBLOCK: a FIFO planted there must not hold the open up.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// The file opened, not whatever the name points at by now.
	if fi, err = f.Stat(); err != nil {
		return "", err
	}
	if err := ownOnly(path, fi, false); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPointer+1))
	switch {
	case err != nil:
		return "", err
	case len(b) > maxPointer:
		return "", fmt.Errorf("%s: over %d bytes, so not a pointer", path, maxPointer)
	}
	home := strings.TrimSuffix(string(b), "\n")
	if !filepath.IsAbs(home) || strings.ContainsAny(home, "\x00\n") {
		return "", fmt.Errorf("%s: does not hold an absolute path", path)
	}
	return home, nil
}

// ownOnly checks that fi, of path, is a folder (dir) or a regular file,
// belongs to this process's user and may be written by no one else.
func ownOnly(path string, fi os.FileInfo, dir bool) error {
	what, isType := "a regular file", fi.Mode().IsRegular()
	if dir {
		what, isType = "a folder", fi.IsDir()
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !isType:
		return fmt.Errorf("%s: not %s", path, what)
	case !ok:
		return fmt.Errorf("%s: its owner is not known on this system", path)
	case int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s: belongs to uid %d, not to this user", path, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s: others may write it (mode %#o)", path, fi.Mode().Perm())
	}
	return nil
}
