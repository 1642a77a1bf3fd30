package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/manifests"
)

// The skills folder, followed: a skill copied in, changed or removed while
// the daemon runs becomes, changes or stops being the tool skill.NAME and
// a name the kernel runs, as the plugins folder is followed (host/watch.go).

// SkillsFolder is the folder of binary skills WatchSkills follows: each
// folder in it holding a skill.toml is a skill.
type SkillsFolder struct {
	// Dir is the folder; it is created (mode 0700) when it does not
	// exist, so that copying a skill folder into it works.
	Dir string
	// Stage, when set, is where each skill's folder is copied for the
	// kernel to run: the sandboxes' uids cannot pass through a home of
	// mode 0700, so a root kernel runs a copy in a folder they may
	// pass. Empty runs the skills where they are installed.
	Stage string
	// MaxSkills caps the folders read as skills, in the order of their
	// names, broken ones too; those past it are listed as skipped.
	// Default 256.
	MaxSkills int
	// MaxFiles and MaxBytes cap one skill's folder (its manifest, its
	// programs, its data); a larger one is skipped. Default 1024 files
	// and 64 MiB.
	MaxFiles int
	MaxBytes int64
}

func (f *SkillsFolder) defaults() {
	if f.MaxSkills <= 0 {
		f.MaxSkills = 256
	}
	if f.MaxFiles <= 0 {
		f.MaxFiles = 1024
	}
	if f.MaxBytes <= 0 {
		f.MaxBytes = 64 << 20
	}
}

// maxOverListed is how many folders past SkillsFolder.MaxSkills are listed
// each with why; the others are counted in one line.
const maxOverListed = 8

// skillSettle is how long the folder must be quiet before a rescan: a cp
// -r of a skill is a folder, then its files, each in several writes.
const skillSettle = 200 * time.Millisecond

// skillWatch is the state of the followed folder. Only its goroutine (and
// WatchSkills, before starting it) touches the fields but stop and done.
type skillWatch struct {
	f       SkillsFolder
	w       *fsnotify.Watcher // nil when the folder cannot be watched
	watched map[string]bool   // the skill folders added to w
	loaded  map[string]installed
	skipped map[string]string // tool name → the reason logged last
	seq     int               // names the staged copies
	stop    chan struct{}
	done    chan struct{}
}

// installed is a loaded skill.
type installed struct {
	folder string // its folder in Dir
	origin string // its skill.toml there
	run    string // the skill.toml the kernel runs
	sig    string // what its folder held when it was loaded
}

// WatchSkills loads the skills of f.Dir, registers each as skill.NAME (and
// as a name the kernel runs), and follows the folder: a skill added,
// changed or removed is registered, registered again or removed within a
// fraction of a second. A folder that is not a skill — no or a broken
// skill.toml, a name taken, past a cap — is logged and listed with why as
// a tool that cannot be called. Close stops following it.
func (r *Registry) WatchSkills(f SkillsFolder) error {
	f.defaults()
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return fmt.Errorf("create the skills folder: %w", err)
	}
	if f.Stage != "" {
		// The copies of an earlier run are stale; the path to them must be
		// passable by the sandboxes' uids, and listable by none.
		if err := os.RemoveAll(f.Stage); err != nil {
			return fmt.Errorf("skills: clear %s: %w", f.Stage, err)
		}
		if err := os.Mkdir(f.Stage, 0o711); err != nil {
			return fmt.Errorf("skills: %w", err)
		}
		if err := os.Chmod(f.Stage, 0o711); err != nil {
			return fmt.Errorf("skills: %w", err)
		}
	}
	sw := &skillWatch{f: f, watched: map[string]bool{}, loaded: map[string]installed{}, skipped: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	w, err := fsnotify.NewWatcher()
	if err == nil {
		if err = w.Add(f.Dir); err != nil {
			w.Close()
		}
	}
	if err != nil {
		r.log.Warn("cannot follow the skills folder; skills added to it need a restart", "dir", f.Dir, "err", err)
	} else {
		sw.w = w
	}
	r.mu.Lock()
	if r.watch != nil {
		r.mu.Unlock()
		if sw.w != nil {
			sw.w.Close()
		}
		return errors.New("tools: the registry already follows a skills folder")
	}
	r.watch = sw
	r.mu.Unlock()
	r.rescanSkills(sw)
	r.cfg.Kernel.SetSkills(r.SkillPath)
	go r.followSkills(sw)
	return nil
}

// stopWatch stops following the skills folder and waits for it.
func (r *Registry) stopWatch() {
	r.mu.Lock()
	sw := r.watch
	r.mu.Unlock()
	if sw == nil {
		return
	}
	select {
	case <-sw.stop:
	default:
		close(sw.stop)
	}
	<-sw.done
}

// followSkills rescans once the folder has been quiet for skillSettle after
// a change. It ends with stopWatch.
func (r *Registry) followSkills(sw *skillWatch) {
	defer close(sw.done)
	if sw.w == nil {
		<-sw.stop
		return
	}
	defer sw.w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-sw.stop:
			return
		case _, ok := <-sw.w.Events:
			if !ok {
				return
			}
			timer.Reset(skillSettle)
		case err, ok := <-sw.w.Errors:
			if !ok {
				return
			}
			r.log.Warn("following the skills folder", "dir", sw.f.Dir, "err", err)
			timer.Reset(skillSettle) // events may have been lost
		case <-timer.C:
			r.rescanSkills(sw)
		}
	}
}

// follow watches the folder dir, once; a change in it from here on
// rescans again.
func (sw *skillWatch) follow(dir string) {
	if sw.w != nil && !sw.watched[dir] {
		if err := sw.w.Add(dir); err == nil {
			sw.watched[dir] = true
		}
	}
}

// candidate is a skill folder found by a scan.
type candidate struct {
	name, folder, origin, sig string
}

// rescanSkills reads the folder and brings the registered skills in line
// with it.
func (r *Registry) rescanSkills(sw *skillWatch) {
	dir := sw.f.Dir
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("cannot read the skills folder", "dir", dir, "err", err)
		return // keep what is loaded
	}
	var found []candidate
	byName := map[string]string{} // name → folder
	skipped := map[string]abi.ToolInfo{}
	skip := func(tool, origin, why string) {
		for skipped[tool].Name != "" {
			tool += "~"
		}
		skipped[tool] = abi.ToolInfo{Tool: abi.Tool{Name: tool}, Source: abi.ToolSourceSkill, Origin: origin, Error: "not loaded: " + why}
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasPrefix(name, ".") {
			continue // a copy under way (kairo skills add), or hidden
		}
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			if name == "skill.toml" {
				// cp -r of a skill folder into a skills folder not made yet.
				stray := "?"
				if sk, err := manifests.LoadSkill(path); err == nil {
					stray = sk.Skill.Name
				}
				skip(skillPrefix+stray, path, "a skill is a folder holding its skill.toml: move the folder's files to "+filepath.Join(dir, stray)+"/")
			}
			continue
		}
		origin := filepath.Join(path, "skill.toml")
		tool := skillPrefix + name
		if n++; n > sw.f.MaxSkills {
			// Listed one by one up to a few; the rest in a sum.
			if over := n - sw.f.MaxSkills; over <= maxOverListed {
				skip(tool, origin, fmt.Sprintf("the skills folder holds more than %d skills", sw.f.MaxSkills))
			} else {
				sum := skillPrefix + "…"
				skipped[sum] = abi.ToolInfo{Tool: abi.Tool{Name: sum}, Source: abi.ToolSourceSkill, Origin: dir,
					Error: fmt.Sprintf("not loaded: the skills folder holds more than %d skills; %d more folders are not read", sw.f.MaxSkills, over-maxOverListed)}
			}
			continue
		}
		sw.follow(path)
		sk, err := manifests.LoadSkill(origin)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			skip(tool, origin, "the folder has no skill.toml")
			continue
		case err != nil:
			skip(tool, origin, strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		if other, ok := byName[sk.Skill.Name]; ok {
			skip(tool, origin, fmt.Sprintf("skill %s is installed already, from %s", sk.Skill.Name, filepath.Join(dir, other)))
			continue
		}
		sig, dirs, err := folderSignature(path, sw.f.MaxFiles, sw.f.MaxBytes)
		if err != nil {
			skip(tool, origin, err.Error())
			continue
		}
		for _, d := range dirs[1:] {
			sw.follow(d) // a change to a program in bin/ changes the skill too
		}
		byName[sk.Skill.Name] = name
		found = append(found, candidate{name: sk.Skill.Name, folder: path, origin: origin, sig: sig})
	}
	for path := range sw.watched {
		if _, err := os.Stat(path); err != nil {
			delete(sw.watched, path) // the watch went with the folder
		}
	}

	// Removed: unregistered.
	for name, old := range sw.loaded {
		if !slices.ContainsFunc(found, func(c candidate) bool { return c.name == name }) {
			r.removeSkill(name)
			delete(sw.loaded, name)
			removeStaged(old)
			r.log.Info("skill removed", "skill", name, "folder", old.folder)
		}
	}
	r.clearSkipped(sw)
	for _, c := range found {
		old, had := sw.loaded[c.name]
		if had && c.sig == old.sig && c.origin == old.origin {
			continue // unchanged
		}
		run := c.origin
		if sw.f.Stage != "" {
			sw.seq++
			copyDir := filepath.Join(sw.f.Stage, c.name+"."+strconv.Itoa(sw.seq))
			if err := stageSkill(c.folder, copyDir, sw.f.MaxBytes); err != nil {
				os.RemoveAll(copyDir)
				skip(skillPrefix+c.name, c.origin, fmt.Sprintf("copy it for the sandbox: %v", err))
				continue
			}
			run = filepath.Join(copyDir, "skill.toml")
		}
		if err := r.addSkillFrom(c.name, c.origin, run, had); err != nil {
			if run != c.origin {
				os.RemoveAll(filepath.Dir(run))
			}
			if had { // the old one stays no longer than its folder did
				r.removeSkill(c.name)
				delete(sw.loaded, c.name)
				removeStaged(old)
			}
			skip(skillPrefix+c.name, c.origin, strings.TrimPrefix(err.Error(), "tools: "))
			continue
		}
		sw.loaded[c.name] = installed{folder: c.folder, origin: c.origin, run: run, sig: c.sig}
		if had {
			removeStaged(old)
			r.log.Info("skill changed", "skill", c.name, "folder", c.folder)
		} else {
			r.log.Info("skill installed", "skill", c.name, "folder", c.folder)
		}
	}
	r.setSkipped(sw, skipped)
}

// removeStaged removes the copy the kernel ran of the skill s, if it ran
// one. A process running from it keeps what it opened.
func removeStaged(s installed) {
	if s.run != s.origin {
		os.RemoveAll(filepath.Dir(s.run))
	}
}

// clearSkipped unlists the skipped folders of the last scan.
func (r *Registry) clearSkipped(sw *skillWatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tool := range sw.skipped {
		if e := r.tools[tool]; e != nil && e.info.Error != "" {
			delete(r.tools, tool)
		}
	}
}

// setSkipped lists the skipped folders as tools that cannot be called and
// logs each new reason once.
func (r *Registry) setSkipped(sw *skillWatch, skipped map[string]abi.ToolInfo) {
	r.mu.Lock()
	for tool, info := range skipped {
		if r.tools[tool] != nil {
			info.Name += " (" + filepath.Base(filepath.Dir(info.Origin)) + ")"
		}
		msg := info.Error
		r.tools[info.Name] = &entry{info: info, run: func(context.Context, *Invocation) abi.ToolResultEvent {
			return abi.ToolResultEvent{Error: msg}
		}}
	}
	r.mu.Unlock()
	now := map[string]string{}
	for _, info := range skipped {
		now[info.Name] = info.Error
		if sw.skipped[info.Name] != info.Error {
			r.log.Warn("a skill the agent cannot run", "manifest", info.Origin, "why", info.Error)
		}
	}
	sw.skipped = now
}

// folderSignature sums the names, modes, sizes and times of what dir
// holds, without following links: a change to any of them changes it. It
// returns the folders in it too, dir first. A folder of more than
// maxFiles entries or maxBytes is an error.
func folderSignature(dir string, maxFiles int, maxBytes int64) (string, []string, error) {
	var dirs []string
	h := sha256.New()
	files, size := 0, int64(0)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if files++; files > maxFiles {
			return fmt.Errorf("its folder holds more than %d files; a skill folder holds its manifest and its programs", maxFiles)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			if size += fi.Size(); size > maxBytes {
				return fmt.Errorf("its folder holds more than %d MiB; a skill folder holds its manifest and its programs", maxBytes>>20)
			}
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "%q %v %d %d\n", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(h.Sum(nil)), dirs, nil
}

// stageSkill copies the skill folder src to dst, which must not exist:
// folders, regular files and links as they are, modes kept, but dst itself
// passable by every uid (the sandboxes' among them). At most maxBytes are
// copied.
func stageSkill(src, dst string, maxBytes int64) error {
	left := maxBytes
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			mode := fi.Mode().Perm()
			if rel == "." {
				mode |= 0o711
			}
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
			return os.Chmod(to, mode)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case fi.Mode().IsRegular():
			n, err := copyFile(path, to, fi.Mode().Perm(), left)
			left -= n
			return err
		}
		return nil // a socket, a device: not part of a skill
	})
}

// copyFile copies the regular file src to dst with mode, at most max
// bytes, and returns how many it copied.
func copyFile(src, dst string, mode fs.FileMode, max int64) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(in, max+1))
	if err == nil && n > max {
		err = errors.New("the folder grew past its size cap while it was copied")
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, mode)
	}
	return n, err
}

// InstallSkill copies the skill folder src — a folder holding a valid
// skill.toml — into the skills folder f.Dir as f.Dir/NAME, NAME the name
// its manifest gives, and returns NAME. The copy is made under a hidden
// name, which WatchSkills passes over, and renamed into place whole. A
// skill of that name already installed is an error unless replace. The
// folder must hold no more than f.MaxFiles files and f.MaxBytes.
func InstallSkill(src string, f SkillsFolder, replace bool) (string, error) {
	f.defaults()
	if fi, err := os.Stat(src); err == nil && !fi.IsDir() && filepath.Base(src) == "skill.toml" {
		src = filepath.Dir(src) // the manifest named: its folder
	}
	sk, err := manifests.LoadSkill(filepath.Join(src, "skill.toml"))
	if err != nil {
		return "", err
	}
	name := sk.Skill.Name
	if _, _, err := folderSignature(src, f.MaxFiles, f.MaxBytes); err != nil {
		return "", fmt.Errorf("skill %s: %w", name, err)
	}
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return "", fmt.Errorf("create the skills folder: %w", err)
	}
	dst := filepath.Join(f.Dir, name)
	if _, err := os.Lstat(dst); err == nil && !replace {
		return "", fmt.Errorf("a skill folder %s is installed already; replace it with --replace, or remove it", dst)
	}
	tmp := filepath.Join(f.Dir, "."+name+".new-"+strconv.Itoa(os.Getpid()))
	os.RemoveAll(tmp)
	if err := stageSkill(src, tmp, f.MaxBytes); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("copy %s: %w", src, err)
	}
	// The copy keeps the folder's own mode, not the one made passable
	// for a stage.
	if fi, err := os.Stat(src); err == nil {
		os.Chmod(tmp, fi.Mode().Perm())
	}
	if _, err := os.Lstat(dst); err == nil {
		// Swapped in one step: the folder is never without the skill.
		if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE); err == nil {
			os.RemoveAll(tmp) // the old one, now
			return name, nil
		}
		old := filepath.Join(f.Dir, "."+name+".old-"+strconv.Itoa(os.Getpid()))
		if err := os.Rename(dst, old); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return name, nil
}
