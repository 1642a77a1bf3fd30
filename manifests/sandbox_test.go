package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxUIDRange: a uid range that holds an account or a group of the
// machine, or reaches down into the 16-bit uids, is refused naming the
// field and what it holds; a range clear of both loads.
func TestSandboxUIDRange(t *testing.T) {
	dir := t.TempDir()
	passwd, group := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	os.WriteFile(passwd, []byte("root:x:0:0::/root:/bin/sh\nbig:x:3000000000:3000000000::/:/bin/sh\n"), 0o644)
	os.WriteFile(group, []byte("root:x:0:\nwide:x:4000000000:\n"), 0o644)
	saved := passwdFiles
	passwdFiles = [2]string{passwd, group}
	t.Cleanup(func() { passwdFiles = saved })

	for _, tc := range []struct {
		name, text, key, want string
	}{
		{"an account in it", "[sandbox]\nuid_base = 2999999000\nuid_count = 65536\n", "sandbox.uid_base", "holds the account big (3000000000"},
		{"a group in it", "[sandbox]\nuid_base = 3999999999\nuid_count = 2\n", "sandbox.uid_base", "holds the group wide (4000000000"},
		{"16-bit uids", "[sandbox]\nuid_base = 1000\n", "sandbox.uid_base", "want a uid from 65536"},
		{"past the top", "[sandbox]\nuid_base = 4294967000\nuid_count = 65536\n", "sandbox.uid_count", "want from 1 to 295 uids"},
		{"bad grace", "[sandbox]\nstop_grace = \"soon\"\n", "sandbox.stop_grace", `"soon" is not a duration`},
		{"negative limit", "[sandbox.limits]\nprocesses = -1\n", "sandbox.limits.processes", "is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want %s: ...%s", err, tc.key, tc.want)
			}
		})
	}
	// The control: clear of both, and the overrides read.
	c, err := Load(writeConfig(t, "[sandbox]\nuid_base = 100000\nuid_count = 1000\nstop_grace = \"1s\"\nkeep_workspaces = true\nworkspace_max = \"10MiB\"\n[sandbox.limits]\nprocesses = 32\nmemory = \"256MiB\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox
	if s.UIDBase != 100000 || s.UIDCount != 1000 || s.StopGraceDuration().Seconds() != 1 || !s.KeepWorkspaces || s.WorkspaceMax != 10*MiB ||
		s.Limits.Processes != 32 || s.Limits.Memory != 256*MiB {
		t.Fatalf("loaded %+v", s)
	}
}
