package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// openStore opens a store in a new folder of the test's.
func openStore(t *testing.T, external map[string]Source) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "secrets"), external)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func wantErr(t *testing.T, err error, what string, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v; want it to say %q", what, err, p)
		}
	}
}

func TestStoreSetGet(t *testing.T) {
	s := openStore(t, nil)
	if m := mode(t, s.Dir()); m != 0o700 {
		t.Errorf("the store folder has mode %04o; want 0700", m)
	}
	if err := s.Set("deploy", []byte("tok-123456")); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, filepath.Join(s.Dir(), "deploy")); m != 0o600 {
		t.Errorf("the secret's file has mode %04o; want 0600", m)
	}
	if v, err := s.Get("deploy"); err != nil || string(v) != "tok-123456" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	// Replaced atomically: no temporary file is left beside it.
	if err := s.Set("deploy", []byte("tok-654321\n")); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Get("deploy"); string(v) != "tok-654321\n" {
		t.Errorf("Get after Set = %q; a stored value is kept as it was given", v)
	}
	entries, _ := os.ReadDir(s.Dir())
	if len(entries) != 1 {
		t.Errorf("the store folder holds %d entries; want the secret's file alone", len(entries))
	}
}

// A secret changed while Kairo runs is read at the next Get: nothing is
// cached.
func TestGetReadsChangedValue(t *testing.T) {
	s := openStore(t, nil)
	s.Set("deploy", []byte("first-value"))
	os.WriteFile(filepath.Join(s.Dir(), "deploy"), []byte("second-value"), 0o600)
	if v, err := s.Get("deploy"); err != nil || string(v) != "second-value" {
		t.Errorf("Get = %q, %v; want the file's new value", v, err)
	}
}

func TestGetNotFound(t *testing.T) {
	s := openStore(t, nil)
	_, err := s.Get("deploy")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing secret = %v; want ErrNotFound", err)
	}
	wantErr(t, err, "Get of a missing secret", "deploy", "kairo secrets set deploy")
	wantErr(t, s.Remove("deploy"), "Remove of a missing secret", "deploy")
	if err := s.Remove("deploy"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove of a missing secret = %v; want ErrNotFound", err)
	}
}

func TestRemove(t *testing.T) {
	s := openStore(t, nil)
	s.Set("deploy", []byte("tok-123456"))
	if err := s.Remove("deploy"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("deploy"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove = %v; want ErrNotFound", err)
	}
}

// A store folder others may use is refused; the same folder at 0700 is
// the control.
func TestOpenRefusesOpenFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	for _, perm := range []os.FileMode{0o750, 0o705, 0o770, 0o755} {
		os.Mkdir(dir, 0o700)
		os.Chmod(dir, perm)
		_, err := Open(dir, nil)
		wantErr(t, err, "Open of a folder of mode "+perm.String(), "other users", "chmod 700 "+dir)
	}
	os.Chmod(dir, 0o700)
	if _, err := Open(dir, nil); err != nil {
		t.Errorf("Open of a 0700 folder: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	_, err := Open(file, nil)
	wantErr(t, err, "Open of a file", "not a folder")
}

// Values out of bounds are refused, each with why, and quoted nowhere; the
// bounds themselves are the control.
func TestSetRefusesValues(t *testing.T) {
	s := openStore(t, nil)
	for _, c := range []struct {
		value []byte
		want  string
	}{
		{[]byte("12345"), "at least 6"},
		{[]byte(strings.Repeat("x", MaxLen+1)), "at most"},
		{[]byte("abc\x00defgh"), "NUL"},
	} {
		err := s.Set("deploy", c.value)
		wantErr(t, err, "Set", c.want, "deploy")
		if err != nil && len(c.value) < 100 && strings.Contains(err.Error(), string(c.value)) {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
	for _, v := range []string{"123456", strings.Repeat("x", MaxLen)} {
		if err := s.Set("deploy", []byte(v)); err != nil {
			t.Errorf("Set of %d bytes: %v", len(v), err)
		}
	}
	wantErr(t, s.Set("Deploy", []byte("tok-123456")), "Set with a bad name", "not a secret name")
	wantErr(t, s.Set("../deploy", []byte("tok-123456")), "Set with a path", "not a secret name")
}

// A stored file others may read is refused with the chmod that mends it,
// and so is a link; the file at 0600 is the control.
func TestGetRefusesOpenFile(t *testing.T) {
	s := openStore(t, nil)
	s.Set("deploy", []byte("tok-123456"))
	path := filepath.Join(s.Dir(), "deploy")
	os.Chmod(path, 0o640)
	_, err := s.Get("deploy")
	wantErr(t, err, "Get of a 0640 file", "other users", "chmod 600 "+path)
	os.Chmod(path, 0o600)
	if _, err := s.Get("deploy"); err != nil {
		t.Errorf("Get of a 0600 file: %v", err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte("tok-123456"), 0o600)
	os.Symlink(target, filepath.Join(s.Dir(), "linked"))
	if _, err := s.Get("linked"); err == nil {
		t.Error("Get followed a link out of the store")
	}
}

func TestExternalFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca-key")
	os.WriteFile(file, []byte("-----KEY-----\n"), 0o600)
	s := openStore(t, map[string]Source{"ca-key": {File: file}})
	if v, err := s.Get("ca-key"); err != nil || string(v) != "-----KEY-----" {
		t.Errorf("Get = %q, %v; want the file's value without its trailing newline", v, err)
	}
	// A file others may change, or anyone may read, is refused; the
	// group may read it (a service group's key).
	for _, perm := range []os.FileMode{0o644, 0o620, 0o602} {
		os.Chmod(file, perm)
		_, err := s.Get("ca-key")
		wantErr(t, err, "Get of a file of mode "+perm.String(), "other users", "chmod 600")
	}
	os.Chmod(file, 0o640)
	if _, err := s.Get("ca-key"); err != nil {
		t.Errorf("Get of a 0640 file: %v", err)
	}
	os.Remove(file)
	_, err := s.Get("ca-key")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing file = %v; want ErrNotFound", err)
	}
	wantErr(t, err, "Get of a missing file", file)
	wantErr(t, s.Set("ca-key", []byte("tok-123456")), "Set of an external secret", "external", "kairo.toml")
	wantErr(t, s.Remove("ca-key"), "Remove of an external secret", "external", "kairo.toml")
}

func TestExternalEnv(t *testing.T) {
	s := openStore(t, map[string]Source{"gh": {Env: "KAIRO_TEST_GH_TOKEN"}})
	t.Setenv("KAIRO_TEST_GH_TOKEN", "ghp_123456")
	if v, err := s.Get("gh"); err != nil || string(v) != "ghp_123456" {
		t.Errorf("Get = %q, %v", v, err)
	}
	os.Unsetenv("KAIRO_TEST_GH_TOKEN")
	_, err := s.Get("gh")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an unset variable = %v; want ErrNotFound", err)
	}
	wantErr(t, err, "Get of an unset variable", "KAIRO_TEST_GH_TOKEN", "not set")
	t.Setenv("KAIRO_TEST_GH_TOKEN", "short")
	wantErr(t, func() error { _, err := s.Get("gh"); return err }(), "Get of a short value", "at least 6")
}

func TestOpenRefusesBadSources(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	for _, c := range []struct {
		ext  map[string]Source
		want string
	}{
		{map[string]Source{"ca": {}}, "one of the two"},
		{map[string]Source{"ca": {File: "/a", Env: "A"}}, "one of the two"},
		{map[string]Source{"ca": {File: "ca.pem"}}, "absolute"},
		{map[string]Source{"CA": {Env: "A"}}, "not a secret name"},
	} {
		_, err := Open(dir, c.ext)
		wantErr(t, err, "Open", c.want)
	}
	if _, err := Open(dir, map[string]Source{"ca": {File: "/etc/ca.pem"}, "gh": {Env: "GH"}}); err != nil {
		t.Errorf("Open with good sources: %v", err)
	}
}

func TestNames(t *testing.T) {
	s := openStore(t, map[string]Source{"gh": {Env: "GH"}, "ca-key": {File: "/etc/ca"}})
	s.Set("deploy", []byte("tok-123456"))
	s.Set("aws.key", []byte("tok-123456"))
	os.WriteFile(filepath.Join(s.Dir(), ".deploy.123"), nil, 0o600) // a temporary file
	os.WriteFile(filepath.Join(s.Dir(), "Bad Name"), nil, 0o600)
	os.Mkdir(filepath.Join(s.Dir(), "folder"), 0o700)
	want := []string{"aws.key", "ca-key", "deploy", "gh"}
	if got := s.Names(); !slices.Equal(got, want) {
		t.Errorf("Names = %q; want %q", got, want)
	}
}
