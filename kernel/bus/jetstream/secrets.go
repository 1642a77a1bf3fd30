package jetstream

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/kairo-os/kairo/manifests"
)

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
