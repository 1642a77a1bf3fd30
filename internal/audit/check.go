package audit

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// actionsLogged is the sysctl that says which seccomp verdicts the kernel
// logs when a filter asks (SECCOMP_FILTER_FLAG_LOG).
const actionsLogged = "/proc/sys/kernel/seccomp/actions_logged"

// SeccompLogsErrno reports whether the kernel logs the seccomp filter's
// ERRNO refusals (kernel.seccomp.actions_logged holds "errno", as by
// default), and the sysctl's value.
func SeccompLogsErrno() (bool, string) {
	b, err := os.ReadFile(actionsLogged)
	if err != nil {
		return false, ""
	}
	v := strings.TrimSpace(string(b))
	return slices.Contains(strings.Fields(v), "errno"), v
}

// WriteCheck writes what this kernel can tell kairo of the sandbox's
// refusals (kairo.sandbox.denied), for `kairo sandbox check`: whether
// Landlock logs them (landlockABI ≥ 7), whether the seccomp filter's are
// logged, the audit subsystem's state and what `kairo up` would do with
// it under [sandbox] audit = mode ("auto", "" or "off").
func WriteCheck(w io.Writer, landlockABI int, mode string) {
	fmt.Fprintln(w, "sandbox refusals (kairo.sandbox.denied), as the audit subsystem reports them to a kernel run as root:")
	switch {
	case landlockABI >= 7:
		fmt.Fprintf(w, "  landlock: ABI %d logs the refusals of the programs a sandbox runs (files, TCP ports, scopes)\n", landlockABI)
	case landlockABI > 0:
		fmt.Fprintf(w, "  landlock: ABI %d logs no refusal of the programs a sandbox runs (that takes ABI 7): file and port refusals are not reported\n", landlockABI)
	default:
		fmt.Fprintln(w, "  landlock: none on this kernel")
	}
	if ok, v := SeccompLogsErrno(); ok {
		fmt.Fprintln(w, "  seccomp: the filter's refusals are logged (kernel.seccomp.actions_logged holds errno)")
	} else if v != "" {
		fmt.Fprintf(w, "  seccomp: the filter's refusals are not logged: kernel.seccomp.actions_logged is %q, without errno\n", v)
	} else {
		fmt.Fprintln(w, "  seccomp: the filter's refusals are not logged: "+actionsLogged+" cannot be read")
	}
	off := mode == "off"
	st, err := GetStatus()
	switch {
	case err != nil:
		fmt.Fprintf(w, "  audit: its state cannot be read (%v); kairo up reads it only when run as root\n", err)
	case off:
		fmt.Fprintf(w, "  audit: %s; [sandbox] audit = \"off\": kairo up leaves it alone and reports no refusal\n", st.EnabledString())
	case st.Enabled == Off:
		fmt.Fprintln(w, "  audit: off; kairo up turns it on while it runs, and off again when the last kairo stops ([sandbox] audit = \"auto\")")
	case st.Enabled == Locked:
		fmt.Fprintln(w, "  audit: on and locked until the next boot; kairo up reads it and changes nothing")
	default:
		if prev, ok := readMarker(DefaultDir + "/" + markerName); ok {
			fmt.Fprintf(w, "  audit: on, turned on by a kairo (it was %s); the last kairo to stop turns it off again\n", prev)
		} else {
			fmt.Fprintln(w, "  audit: on; kairo up reads it and changes nothing")
		}
	}
	if err == nil && st.PID != 0 {
		fmt.Fprintf(w, "  audit daemon: pid %d also receives every record; kairo only listens\n", st.PID)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(w, "  not root: a kairo up run as this user reports no refusal (its trees have no uid of their own, and audit is root's)")
	}
}
