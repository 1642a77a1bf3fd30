package sandbox

import (
	"slices"
	"strings"
	"sync"
)

// System folders every profile may read: programs, libraries, and the few
// files of /etc that the C library and common tools read at start. Not /etc
// as a whole, not /home, not /root, not /var, not /sys, no devices but the
// data sinks and sources.
var systemRead = []string{
	"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
	"/etc/alternatives", "/etc/ssl/certs", "/etc/mime.types",
	"/proc",
}

// systemExec are the folders of installed programs.
var systemExec = []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/lib", "/usr/libexec", "/usr/local/bin"}

// systemFolders are the system folders this machine has, looked up once:
// every spawn without a manifest needs them.
var systemFolders = sync.OnceValue(func() struct{ read, exec []string } {
	return struct{ read, exec []string }{existing(systemRead), existing(systemExec)}
})

// DefaultPath is the PATH of a sandboxed binary that was not given one.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// Default is the profile of a spawn without a manifest: read-only system
// folders, write only to work (its workspace) and tmp, no network, no
// devices. env is added to a minimal environment (PATH, HOME=work,
// TMPDIR=tmp, LANG).
func Default(work, tmp string, env []string) *Policy {
	p := &Policy{
		Read:  slices.Clone(systemFolders().read), // the caller may add to them
		Exec:  slices.Clone(systemFolders().exec),
		Write: []string{work, tmp},
		Dir:   work,
		UID:   -1,
		GID:   -1,
	}
	p.Env = MergeEnv([]string{
		"PATH=" + DefaultPath,
		"HOME=" + work,
		"TMPDIR=" + tmp,
		"LANG=C.UTF-8",
	}, env)
	return p
}

// MergeEnv is base with the variables of over set on top.
func MergeEnv(base, over []string) []string {
	out := append([]string(nil), base...)
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, b := range out {
			if n, _, _ := strings.Cut(b, "="); n == name {
				out[i], replaced = kv, true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}
