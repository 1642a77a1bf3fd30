package wasm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
)

// The compilation cache on disk holds machine code the host maps and runs
// without another check: whoever can write a file in it runs code as the
// daemon. So the cache is one user's own, shared by every home of that user
// (the modules are the same, and a new home should not compile them again),
// and the host uses it only when no one else can write it
// (docs/RATIONALE.md#the-compilation-cache-is-the-users-and-checked).

// CacheFolder is where wazero keeps the modules it compiles under the cache
// root: a folder per wazero version, machine and system, so that an upgrade
// never maps code an older wazero compiled.
func CacheFolder(root string) string {
	return filepath.Join(root, "wazero-"+wazeroVersion()+"-"+runtime.GOARCH+"-"+runtime.GOOS)
}

// wazeroVersion is the wazero module this binary was built with, as wazero
// names its cache folder (its internal/version): the version go.mod pins,
// or "dev".
func wazeroVersion() string {
	v := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
				v = dep.Version
			}
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}

// OpenCache makes the compilation cache's root folder, mode 0700, if it
// is missing, and checks it ([CheckCache]).
func OpenCache(root string) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("compilation cache %s: %w", root, err)
	}
	return CheckCache(root)
}

// CheckCache returns an error, naming the path, its owner and mode and what
// to run, when the compilation cache under root is not the host's user's
// alone: when root or anything in it is a symbolic link or something other
// than a folder or a file, is owned by another user, or is writable by its
// group or others; or when a folder above root lets another user replace
// it (owned by neither the user nor root, or writable by others without
// the sticky bit, as /tmp has).
func CheckCache(root string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("compilation cache %s: %w", root, err)
	}
	euid := os.Geteuid()
	refuse := func(problem, fix string) error {
		return &CacheError{Root: abs, Problem: problem, Fix: fix, euid: euid}
	}
	// The folders above: followed through their links, as a home on
	// another disk often is.
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return fmt.Errorf("compilation cache %s: %w", abs, err)
	}
	for dir := parent; ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("compilation cache %s: %w", abs, err)
		}
		uid := ownerOf(fi)
		mode := fi.Mode()
		switch {
		case uid != euid && uid != 0:
			return refuse(fmt.Sprintf("the folder %s above it is owned by %s (mode %v), who can replace the cache", dir, owner(uid), mode),
				"set [host] cache_dir in kairo.toml to a folder of your own")
		case mode.Perm()&0o022 != 0 && mode&fs.ModeSticky == 0:
			return refuse(fmt.Sprintf("the folder %s above it is writable by others (mode %v, owner %s), who can replace the cache", dir, mode, owner(uid)),
				fmt.Sprintf("run `chmod go-w %s`, or set [host] cache_dir in kairo.toml to a folder of your own", dir))
		}
		if up := filepath.Dir(dir); up == dir {
			break
		}
	}
	// The root and everything in it: not followed. An entry gone between
	// the listing and its check is another engine's temporary file, renamed
	// into place (wazero's filecache.Add): nothing is left of it to run.
	return filepath.WalkDir(abs, func(path string, e fs.DirEntry, err error) error {
		var fi fs.FileInfo
		if err == nil {
			fi, err = e.Info()
		}
		if err != nil {
			if path != abs && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("compilation cache %s: %w", abs, err)
		}
		mode, uid := fi.Mode(), ownerOf(fi)
		what := "the file"
		if e.IsDir() {
			what = "the folder"
		}
		remove := fmt.Sprintf("remove it (`rm %s`), or the whole cache (`rm -r %s`): what it held is compiled again", path, abs)
		if path == abs {
			remove = fmt.Sprintf("remove it (`rm -r %s`): what it held is compiled again", abs)
		}
		switch {
		case mode&fs.ModeSymlink != 0:
			return refuse(fmt.Sprintf("%s is a symbolic link", path), remove+"; or set [host] cache_dir to the folder it points to")
		case !mode.IsDir() && !mode.IsRegular():
			return refuse(fmt.Sprintf("%s is neither a folder nor a file (mode %v)", path, mode), remove)
		case uid != euid:
			return refuse(fmt.Sprintf("%s %s is owned by %s (mode %v)", what, path, owner(uid), mode), remove)
		case mode.Perm()&0o022 != 0:
			chmod := "700"
			if !e.IsDir() {
				chmod = "600"
			}
			return refuse(fmt.Sprintf("%s %s is writable by %s (mode %v, owner %s)", what, path, writers(mode), mode, owner(uid)),
				fmt.Sprintf("run `chmod %s %s`, or %s", chmod, path, remove))
		}
		return nil
	})
}

// CacheError is CheckCache's refusal of a compilation cache another user
// could write.
type CacheError struct {
	Root    string // the cache
	Problem string // which path, whose, what mode
	Fix     string // what to run
	euid    int
}

// Error names the cache, what is wrong with it and what to run.
func (e *CacheError) Error() string {
	return fmt.Sprintf("compilation cache %s refused: %s; the host runs the machine code in it, so no one but its user (%s) may write it: %s",
		e.Root, e.Problem, owner(e.euid), e.Fix)
}

// ownerOf is the uid owning a file; -1 where the system does not say.
func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// owner words a uid: "uid 65534 (nobody)".
func owner(uid int) string {
	s := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}

// writers words who besides the owner may write a file of mode m.
func writers(m fs.FileMode) string {
	switch p := m.Perm(); {
	case p&0o020 != 0 && p&0o002 != 0:
		return "its group and by others"
	case p&0o020 != 0:
		return "its group"
	default:
		return "others"
	}
}
