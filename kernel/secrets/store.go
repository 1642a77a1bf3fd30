package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// ErrNotFound is a secret neither the store nor kairo.toml holds. Errors
// wrap it with the name and how to set it.
var ErrNotFound = errors.New("no such secret")

// MaxStored bounds the secrets a store folder holds: Set refuses a new
// one past it, and Names reads no more entries than a few times it.
const MaxStored = 1024

// Source is an external secret, [secrets.external.NAME] in kairo.toml:
// a file the operator keeps (File, an absolute path), or a variable of the
// daemon's environment (Env). Exactly one is set.
type Source struct {
	File string
	Env  string
}

// Store is the operator's secrets: the files of one folder, each named as
// its secret and holding its value, and the external ones. Every call reads
// or writes the folder afresh, so a Store is safe for concurrent use and
// sees what `kairo secrets set` changed.
type Store struct {
	dir      string
	external map[string]Source
}

// Open opens the store folder dir, making it (mode 0700) when it does not
// exist, with the external secrets of kairo.toml. A folder others may
// read, write or enter, or one that belongs to another user, is refused:
// it holds every secret.
func Open(dir string, external map[string]Source) (*Store, error) {
	for _, name := range slices.Sorted(maps.Keys(external)) {
		if err := checkSource(name, external[name]); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("secrets: make the store folder: %w", err)
		}
	}
	if err := checkPrivateDir(dir); err != nil {
		return nil, err
	}
	return &Store{dir: dir, external: maps.Clone(external)}, nil
}

// checkSource says what is wrong with the external secret name.
func checkSource(name string, src Source) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("secrets: external secret: %w", err)
	}
	switch {
	case (src.File == "") == (src.Env == ""):
		return fmt.Errorf("secrets: external secret %s: give file (a path) or env (a variable of the daemon's), one of the two", name)
	case src.File != "" && !filepath.IsAbs(src.File):
		return fmt.Errorf("secrets: external secret %s: file %q is relative; give its absolute path", name, src.File)
	}
	return nil
}

// checkPrivateDir refuses a store folder anyone but its owner may use, or
// that is not the running user's.
func checkPrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("secrets: the store folder: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("secrets: the store %s is not a folder; move it aside, and a folder is made", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("secrets: the store folder %s belongs to uid %d, not to this user (%d); use a folder of your own", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("secrets: the store folder %s has mode %04o: other users could read or change the secrets; run chmod 700 %s", dir, perm, dir)
	}
	return nil
}

// Dir is the store's folder.
func (s *Store) Dir() string { return s.dir }

// Set stores value as the secret name, replacing the one it held: written
// to a temporary file and renamed, so a spawn reads the old value or the
// new one, never part of either. The file's mode is 0600.
//
// The value is MinLen to MaxLen bytes with no NUL byte: the kernel may hand
// it to a process in an environment variable, which ends at the first NUL,
// and the part before it would reach the process unmasked. Keep a binary
// key base64-encoded.
func (s *Store) Set(name string, value []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if src, ok := s.external[name]; ok {
		return fmt.Errorf("secret %s is external (%s, in kairo.toml [secrets.external.%s]); change it there, or remove it from kairo.toml first", name, src, name)
	}
	if err := checkValue(name, value); err != nil {
		return err
	}
	if err := checkPrivateDir(s.dir); err != nil {
		return err
	}
	if _, err := os.Lstat(s.path(name)); errors.Is(err, fs.ErrNotExist) && len(s.stored()) >= MaxStored {
		return fmt.Errorf("the store holds %d secrets, the most it may; remove one with `kairo secrets rm NAME` first", MaxStored)
	}
	return writeFile(s.dir, name, value)
}

// String says where an external secret is, without its value.
func (src Source) String() string {
	if src.File != "" {
		return "the file " + src.File
	}
	return "the daemon's environment variable " + src.Env
}

// writeFile writes dir/name atomically, mode 0600.
func writeFile(dir, name string, value []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*") // 0600; a dot: never a secret's name
	if err != nil {
		return fmt.Errorf("set secret %s: %w", name, err)
	}
	tmp := f.Name()
	_, err = f.Write(value)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("set secret %s: %w", name, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the rename itself, through a crash
		d.Close()
	}
	return nil
}

// checkValue says what is wrong with a value of the secret name, without
// quoting it.
func checkValue(name string, value []byte) error {
	switch {
	case len(value) < MinLen:
		return fmt.Errorf("secret %s: the value is %d bytes; a secret is at least %d, since a shorter one would mask common words", name, len(value), MinLen)
	case len(value) > MaxLen:
		return fmt.Errorf("secret %s: the value is over %d bytes; a secret is at most that", name, MaxLen)
	case bytes.IndexByte(value, 0) >= 0:
		return fmt.Errorf("secret %s: the value holds a NUL byte, which an environment variable cannot carry; store a binary key base64-encoded", name)
	}
	return nil
}

// Remove deletes the stored secret name.
func (s *Store) Remove(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if src, ok := s.external[name]; ok {
		return fmt.Errorf("secret %s is external (%s); remove [secrets.external.%s] from kairo.toml instead", name, src, name)
	}
	err := os.Remove(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("secret %s: %w in %s", name, ErrNotFound, s.dir)
	}
	return err
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name) }

// Names is every secret's name, stored and external, sorted.
func (s *Store) Names() []string {
	names := s.stored()
	for name := range s.external {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// IsExternal reports whether name is an external secret, and its source.
func (s *Store) IsExternal(name string) (Source, bool) {
	src, ok := s.external[name]
	return src, ok
}

// stored is the names of the secrets in the folder: its regular files
// with a valid name, of the first 4×MaxStored entries.
func (s *Store) stored() []string {
	d, err := os.Open(s.dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	entries, _ := d.ReadDir(4 * MaxStored)
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && ValidName(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	return names
}

// Get reads the value of the secret name afresh: from its source when it
// is external, else from the store. An external file's one trailing
// newline is dropped (echo writes one), as `kairo secrets set` drops it.
// Errors wrap [ErrNotFound] when there is no such secret; none quotes the
// value.
func (s *Store) Get(name string) ([]byte, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	var (
		value []byte
		err   error
	)
	if src, ok := s.external[name]; ok {
		value, err = src.read(name)
	} else {
		value, err = s.readStored(name)
	}
	if err != nil {
		return nil, err
	}
	if err := checkValue(name, value); err != nil {
		return nil, err
	}
	return value, nil
}

// readStored reads the store's file of name: a regular file, not a link,
// of the running user, that no one else may read or write.
func (s *Store) readStored(name string) ([]byte, error) {
	missing := fmt.Sprintf("set it with `kairo secrets set %s`", name)
	f, fi, err := openRegular(name, s.path(name), syscall.O_NOFOLLOW, missing, "remove it and set the secret again")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("secret %s: %s belongs to uid %d, not to this user (%d); remove it and set the secret again", name, f.Name(), st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secret %s: %s has mode %04o: other users could read or change it; run chmod 600 %s", name, f.Name(), perm, f.Name())
	}
	return readBounded(name, f, MaxLen)
}

// read reads an external secret. A file may be the group's to read (a
// service group's key, 0640); one that anyone may read, or others may
// write, is refused.
func (src Source) read(name string) ([]byte, error) {
	if src.Env != "" {
		v, ok := os.LookupEnv(src.Env)
		if !ok {
			return nil, fmt.Errorf("secret %s: %w: the daemon's environment variable %s is not set; set it before `kairo up`", name, ErrNotFound, src.Env)
		}
		return []byte(v), nil
	}
	missing := fmt.Sprintf("make it, or change [secrets.external.%s] in kairo.toml", name)
	f, fi, err := openRegular(name, src.File, 0, missing, "name the file that holds the value")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if perm := fi.Mode().Perm(); perm&0o026 != 0 {
		return nil, fmt.Errorf("secret %s: %s has mode %04o: other users could read or change it; run chmod 600 %s (or 640, for a group of its readers)", name, src.File, perm, src.File)
	}
	v, err := readBounded(name, f, MaxLen+2) // and "\r\n"
	if err != nil {
		return nil, err
	}
	v = bytes.TrimSuffix(v, []byte("\n"))
	return bytes.TrimSuffix(v, []byte("\r")), nil
}

// openRegular opens path, the file of secret name, to read it: a regular
// file, checked on the descriptor opened (a FIFO would block, a device
// never end). The errors say what to do when the file is missing, and when
// it is something else than a file.
func openRegular(name, path string, flag int, missing, notFile string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flag, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("secret %s: %w: %s does not exist; %s", name, ErrNotFound, path, missing)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("secret %s: %w", name, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file; %s", path, notFile)
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return f, fi, nil
}

// readBounded reads f to its end, refusing more than max bytes (and
// reading no more than one past it).
func readBounded(name string, f *os.File, max int64) ([]byte, error) {
	v, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	if int64(len(v)) > max {
		return nil, fmt.Errorf("secret %s: %s is over %d bytes; a secret is at most that", name, f.Name(), MaxLen)
	}
	return v, nil
}
