package console

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// TokenFile is the token's file name in the data folder.
const TokenFile = "console.token"

// tokenBytes is the token's strength: 32 random bytes, 64 hex digits.
const tokenBytes = 32

// LoadToken returns the console's token, $home/console.token: made at the
// first start (32 random bytes as hex, mode 0600), read after. A file that
// others may read or write, a link, or another user's is refused with what
// to do: the token is what lets a browser act as the operator.
func LoadToken(home string) (string, error) {
	path := filepath.Join(home, TokenFile)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return createToken(path)
	}
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", fmt.Errorf("the console's token %s is a symbolic link; remove it, and kairo up makes a new token", path)
		}
		return "", fmt.Errorf("read the console's token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read the console's token: %w", err)
	}
	if err := checkTokenFile(path, fi); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, 4*tokenBytes))
	if err != nil {
		return "", fmt.Errorf("read the console's token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if raw, err := hex.DecodeString(tok); err != nil || len(raw) != tokenBytes {
		return "", fmt.Errorf("the console's token %s does not hold %d hex digits; remove it, and kairo up makes a new token", path, 2*tokenBytes)
	}
	return tok, nil
}

// checkTokenFile refuses a token file anyone but its owner may use.
func checkTokenFile(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("the console's token %s is not a regular file; remove it, and kairo up makes a new token", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("the console's token %s belongs to uid %d, not to this user (%d): another user could act as you; remove it, and kairo up makes a new token", path, st.Uid, os.Getuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("the console's token %s has mode %04o: other users could read it and act as you; run chmod 600 %s, or remove it for a new token", path, perm, path)
	}
	return nil
}

func createToken(path string) (string, error) {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("make the console's token: %w", err)
	}
	tok := hex.EncodeToString(raw)
	// O_EXCL: a file that appeared meanwhile, a link included, is not
	// written through.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", fmt.Errorf("make the console's token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("make the console's token: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("make the console's token: %w", err)
	}
	return tok, nil
}
