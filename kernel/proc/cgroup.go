package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Cgroup layouts a host offers.
const (
	// CgroupV2: cgroup2 at /sys/fs/cgroup; one cgroup per tree holds
	// kill, freeze and (when memory and pids are delegated) the limits.
	CgroupV2 = "v2"
	// CgroupHybrid: cgroup2 mounted beside v1 hierarchies (at
	// /sys/fs/cgroup/unified) without controllers: kill and freeze act on
	// v2, the memory and pids limits on the v1 hierarchies.
	CgroupHybrid = "hybrid"
	// CgroupV1: v1 hierarchies only: limits in memory and pids, kill by
	// the pids the tree's cgroup lists, pause by signals.
	CgroupV1 = "v1"
)

// Cgroups is what the host offers for process trees: the folders of this
// process's own cgroups, under which a home's cgroups are made. See
// docs/RATIONALE.md#every-tree-in-a-cgroup-a-watchdog-for-a-daemon-that-dies.
type Cgroups struct {
	Layout string
	// Unified is this process's cgroup in the v2 hierarchy ("" without
	// one); Memory and Pids its cgroups in those v1 hierarchies ("" when
	// the limits go to v2 or the hierarchy is missing).
	Unified, Memory, Pids string
	// Limits says whether memory and process counts can be bounded.
	Limits bool
}

// FindCgroups detects the cgroup layout from /proc/self/mountinfo and
// /proc/self/cgroup. It fails — and the kernel falls back to process
// groups and uids — when there is no cgroupfs or this process may not
// make cgroups in it (not root).
func FindCgroups() (*Cgroups, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("not root: the kernel may not make cgroups")
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	dir := func(m cgroupMount, path string) string {
		rel, ok := strings.CutPrefix(path, m.root)
		if !ok {
			return ""
		}
		return filepath.Join(m.point, rel)
	}
	c := &Cgroups{}
	v2root := false
	if m, ok := mounts[""]; ok {
		c.Unified = dir(m, own[""])
		v2root = c.Unified == m.point
	}
	if m, ok := mounts["memory"]; ok {
		c.Memory = dir(m, own["memory"])
	}
	if m, ok := mounts["pids"]; ok {
		c.Pids = dir(m, own["pids"])
	}
	switch {
	case c.Unified != "" && c.Memory == "" && c.Pids == "":
		c.Layout = CgroupV2
		c.Limits = v2Delegates(c.Unified, v2root)
	case c.Unified != "":
		c.Layout = CgroupHybrid
		c.Limits = c.Memory != "" && c.Pids != ""
	case c.Memory != "" || c.Pids != "":
		c.Layout = CgroupV1
		c.Limits = c.Memory != "" && c.Pids != ""
	default:
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	if !c.Limits {
		c.Memory, c.Pids = "", ""
	}
	return c, nil
}

// String says where the trees' cgroups go, for `kairo sandbox check`.
func (c *Cgroups) String() string {
	var b strings.Builder
	switch c.Layout {
	case CgroupV2:
		fmt.Fprintf(&b, "cgroup v2 at %s: kill, freeze", c.Unified)
		if c.Limits {
			b.WriteString(", memory and pids limits")
		} else {
			b.WriteString("; memory and pids are not delegated there, so no limits in the cgroup (rlimits only)")
		}
	case CgroupHybrid:
		fmt.Fprintf(&b, "hybrid: kill and freeze in cgroup v2 at %s", c.Unified)
		if c.Limits {
			fmt.Fprintf(&b, ", memory and pids limits in cgroup v1 at %s and %s", c.Memory, c.Pids)
		} else {
			b.WriteString("; no v1 memory and pids hierarchies, so no limits in the cgroup (rlimits only)")
		}
	case CgroupV1:
		fmt.Fprintf(&b, "cgroup v1: memory and pids limits at %s and %s; kill by listing the tree's pids, pause by signals", c.Memory, c.Pids)
	}
	return b.String()
}

type cgroupMount struct{ point, root string }

// cgroupMounts maps "" to the cgroup2 mount and each v1 controller to its
// hierarchy's mount.
func cgroupMounts() (map[string]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		m := cgroupMount{point: fields[4], root: fields[3]}
		switch tail[0] {
		case "cgroup2":
			if _, seen := out[""]; !seen {
				out[""] = m
			}
		case "cgroup":
			for _, opt := range strings.Split(tail[2], ",") {
				if opt == "memory" || opt == "pids" {
					out[opt] = m
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroupfs is mounted")
	}
	return out, sc.Err()
}

// ownCgroups maps "" to this process's v2 cgroup and each v1 controller to
// its cgroup there.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out, nil
}

// v2Delegates reports whether cgroups made in dir can have memory.max and
// pids.max: both controllers available, and enabled for its children, or
// enableable — a cgroup holding processes (this one) may not enable them
// unless it is the root.
func v2Delegates(dir string, root bool) bool {
	have, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	f := strings.Fields(string(have))
	if !contains(f, "memory") || !contains(f, "pids") {
		return false
	}
	on, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	g := strings.Fields(string(on))
	return root || contains(g, "memory") && contains(g, "pids")
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// CgroupHome is a home's parent cgroup, made in each hierarchy the layout
// uses: one child per process tree, a grandchild per session that joined
// a tree. Everything a home's kernel started is under it, which is what
// the start-up sweep and the watchdog kill.
type CgroupHome struct {
	*Cgroups
	Name string
	dirs []string // the home's folder in each hierarchy, v2 first
	next atomic.Uint64
}

// Home makes (or finds, left by an earlier run) the parent cgroup of the
// home named name.
func (c *Cgroups) Home(name string) (*CgroupHome, error) {
	h := &CgroupHome{Cgroups: c, Name: name}
	if c.Layout == CgroupV2 && c.Limits {
		if err := writeCtl(filepath.Join(c.Unified, "cgroup.subtree_control"), "+memory +pids"); err != nil {
			return nil, fmt.Errorf("enable memory and pids below %s: %w", c.Unified, err)
		}
	}
	for _, base := range []string{c.Unified, c.Memory, c.Pids} {
		if base == "" {
			continue
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("make the home's cgroup: %w", err)
		}
		h.dirs = append(h.dirs, dir)
	}
	if c.Layout == CgroupV2 && c.Limits {
		if err := writeCtl(filepath.Join(h.dirs[0], "cgroup.subtree_control"), "+memory +pids"); err != nil {
			return nil, fmt.Errorf("enable memory and pids for the home's cgroup: %w", err)
		}
	}
	return h, nil
}

// Dirs are the home's cgroup folders, the v2 one first when there is one.
func (h *CgroupHome) Dirs() []string { return h.dirs }

// Sweep kills what an earlier run of this home left in its cgroups — and
// only this home's — waits until they are empty and removes them. It
// returns how many processes it found.
func (h *CgroupHome) Sweep() int {
	found := 0
	for _, d := range h.dirs {
		found = max(found, len(procsUnder(d)))
	}
	if found > 0 {
		killHome(h.dirs, h.Layout != CgroupV1)
	}
	for _, d := range h.dirs {
		removeChildren(d)
	}
	return found
}

// killHome kills every process under dirs (the first a v2 cgroup when v2)
// until none is left.
func killHome(dirs []string, v2 bool) {
	if v2 {
		writeCtl(filepath.Join(dirs[0], "cgroup.kill"), "1")
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		left := 0
		for _, d := range dirs {
			for _, pid := range procsUnder(d) {
				if !zombie(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
					left++
				}
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeChildren removes the cgroups under dir, deepest first.
func removeChildren(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			sub := filepath.Join(dir, e.Name())
			removeChildren(sub)
			rmdirCgroup(sub)
		}
	}
}

// rmdirCgroup removes a cgroup, retrying while the processes it held are
// still leaving it.
func rmdirCgroup(dir string) error {
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// cgroup is the cgroup of a tree, or of a session that joined a tree
// (then parent is the tree's): one folder per hierarchy, v2 first when
// the layout has v2.
type cgroup struct {
	home   *CgroupHome
	parent *cgroup
	dirs   []string
	v2     bool
}

// newTree makes the cgroup of a new tree; setLimits bounds it.
func (h *CgroupHome) newTree() (*cgroup, error) {
	return h.make(h.dirs, "t"+strconv.FormatUint(h.next.Add(1), 10))
}

// join makes the cgroup of a session that joins tree: inside the tree's,
// so counted in its limits and killed with it.
func (tree *cgroup) join() (*cgroup, error) {
	cg, err := tree.home.make(tree.dirs, "s"+strconv.FormatUint(tree.home.next.Add(1), 10))
	if err != nil {
		return nil, err
	}
	cg.parent = tree
	return cg, nil
}

func (h *CgroupHome) make(parents []string, name string) (*cgroup, error) {
	cg := &cgroup{home: h, v2: h.Layout != CgroupV1}
	for _, p := range parents {
		dir := filepath.Join(p, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("make the tree's cgroup: %w", err)
		}
		cg.dirs = append(cg.dirs, dir)
	}
	return cg, nil
}

// setLimits writes memory.max and pids.max (or their v1 names). A v1
// memory limit under what the cgroup holds is refused with EBUSY; patient,
// it is tried again for a moment while the kernel reclaims.
func (cg *cgroup) setLimits(memory, pids uint64, patient bool) error {
	if !cg.home.Limits {
		return nil
	}
	val := func(n uint64) string {
		if n == 0 {
			return "max"
		}
		return strconv.FormatUint(n, 10)
	}
	var writes [][2]string
	if cg.home.Layout == CgroupV2 {
		d := cg.dirs[0]
		writes = [][2]string{{d + "/memory.max", val(memory)}, {d + "/memory.swap.max", "0"}, {d + "/pids.max", val(pids)}}
	} else {
		mem, pid := cg.v1("memory"), cg.v1("pids")
		if memory > 0 {
			writes = append(writes, [2]string{mem + "/memory.limit_in_bytes", val(memory)})
			if _, err := os.Stat(mem + "/memory.memsw.limit_in_bytes"); err == nil {
				writes = append(writes, [2]string{mem + "/memory.memsw.limit_in_bytes", val(memory)})
			}
		}
		writes = append(writes, [2]string{pid + "/pids.max", val(pids)})
	}
	for _, w := range writes {
		err := writeCtl(w[0], w[1])
		// v1 refuses a memory limit under what the cgroup holds while it
		// cannot reclaim the rest at once (the helper's page cache, on a
		// busy disk): it is reclaimed within moments.
		for wait := 5 * time.Millisecond; patient && errors.Is(err, syscall.EBUSY) && wait <= 320*time.Millisecond; wait *= 2 {
			time.Sleep(wait)
			err = writeCtl(w[0], w[1])
		}
		if err != nil && !(errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(w[0], "swap.max")) {
			return fmt.Errorf("cgroup limit: %w", err)
		}
	}
	return nil
}

// v1 is cg's folder in the v1 hierarchy of controller.
func (cg *cgroup) v1(controller string) string {
	base := cg.home.Memory
	if controller == "pids" {
		base = cg.home.Pids
	}
	for _, d := range cg.dirs {
		if strings.HasPrefix(d, base+"/") {
			return d
		}
	}
	return ""
}

// add moves pid (every thread of it) into the cgroup.
func (cg *cgroup) add(pid int) error {
	p := strconv.Itoa(pid)
	for _, d := range cg.dirs {
		if err := writeCtl(filepath.Join(d, "cgroup.procs"), p); err != nil {
			return fmt.Errorf("put the process in its cgroup: %w", err)
		}
	}
	return nil
}

// kill kills every process in the cgroup and its children, and returns
// once none is left.
func (cg *cgroup) kill() {
	killHome(cg.dirs, cg.v2)
}

// signal sends sig to every process in the cgroup and its children.
func (cg *cgroup) signal(sig syscall.Signal) {
	for _, pid := range procsUnder(cg.dirs[0]) {
		syscall.Kill(pid, sig)
	}
}

// freeze stops (or thaws) every process of the cgroup: the v2 freezer,
// which a process cannot notice or undo; SIGSTOP and SIGCONT without v2.
func (cg *cgroup) freeze(on bool) error {
	if !cg.v2 {
		sig := syscall.SIGCONT
		if on {
			sig = syscall.SIGSTOP
		}
		cg.signal(sig)
		return nil
	}
	v := "0"
	if on {
		v = "1"
	}
	return writeCtl(filepath.Join(cg.dirs[0], "cgroup.freeze"), v)
}

// frozen reports whether the v2 freezer has stopped every process.
func (cg *cgroup) frozen() bool {
	return cg.v2 && eventsField(cg.dirs[0], "frozen") == 1
}

// populated reports whether a process is left in the cgroup or below.
func (cg *cgroup) populated() bool {
	if cg.v2 {
		return eventsField(cg.dirs[0], "populated") != 0
	}
	return len(procsUnder(cg.dirs[0])) > 0
}

// waitEmpty waits until no process is left, up to d; it reports whether
// none is.
func (cg *cgroup) waitEmpty(d time.Duration) bool {
	for deadline := time.Now().Add(d); cg.populated(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// oomKills is how many processes the cgroup's memory limit has killed.
func (cg *cgroup) oomKills() int {
	if !cg.home.Limits {
		return 0
	}
	if cg.home.Layout == CgroupV2 {
		b, _ := os.ReadFile(filepath.Join(cg.dirs[0], "memory.events"))
		return field(b, "oom_kill")
	}
	b, _ := os.ReadFile(filepath.Join(cg.v1("memory"), "memory.oom_control"))
	return field(b, "oom_kill")
}

// remove removes the cgroup, deepest folders first; its processes must be
// gone.
func (cg *cgroup) remove() {
	for _, d := range cg.dirs {
		removeChildren(d)
		rmdirCgroup(d)
	}
}

// eventsField is a field of dir's cgroup.events (-1 when unreadable).
func eventsField(dir, name string) int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return -1
	}
	return field(b, name)
}

// field is the value of the "name value" line of b.
func field(b []byte, name string) int {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(name+" ")); ok {
			n, _ := strconv.Atoi(string(v))
			return n
		}
	}
	return 0
}

// procsUnder lists the processes in dir's cgroup and every cgroup below.
func procsUnder(dir string) []int {
	var pids []int
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// writeCtl writes v to a cgroup control file.
func writeCtl(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
