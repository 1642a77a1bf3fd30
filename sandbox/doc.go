// Package sandbox turns a manifest's permissions into the confinement of a
// native binary: closed descriptors, rlimits, one Landlock ruleset, an
// unprivileged uid, no_new_privs and a seccomp filter, applied by a re-exec
// helper before execve. Deny by default; a grant the kernel cannot enforce is
// refused. The sandbox issue fills this package; until then the kernel spawns
// nothing.
package sandbox
