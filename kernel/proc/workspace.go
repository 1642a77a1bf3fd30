package proc

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// A workspace cap is enforced cheaply: RLIMIT_FSIZE stops any one file at
// the cap at once (SIGXFSZ), and a check every few seconds adds up each
// live spawn's workspace and temp folder and ends the tree of one that
// holds more, saying why in kairo.process.canceled and .exited. Many files
// each under the cap can pass it for up to one period.

// defaultSizeEvery is how often the workspaces are measured.
const defaultSizeEvery = 2 * time.Second

// sizeCheck measures the folders of the live spawns of a launcher; its
// goroutine starts with the first spawn watched and ends with close.
type sizeCheck struct {
	every time.Duration // 0: defaultSizeEvery

	mu      sync.Mutex
	watched map[*Session][]string
	stop    chan struct{}
	done    chan struct{}
	closed  bool
}

// watch starts measuring dirs, session s's workspace and temp folder.
func (c *sizeCheck) watch(l *Sandboxed, s *Session, dirs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.watched == nil {
		c.watched = map[*Session][]string{}
		c.stop, c.done = make(chan struct{}), make(chan struct{})
		go c.run(l.WorkspaceMax) // owned by close
	}
	c.watched[s] = dirs
}

// forget stops measuring dirs.
func (c *sizeCheck) forget(dirs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, d := range c.watched {
		if len(d) > 0 && d[0] == dirs[0] {
			delete(c.watched, s)
		}
	}
}

// close stops the check and waits for its goroutine.
func (c *sizeCheck) close() {
	c.mu.Lock()
	c.closed = true
	stop, done := c.stop, c.done
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (c *sizeCheck) run(max int64) {
	defer close(c.done)
	every := c.every
	if every <= 0 {
		every = defaultSizeEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.mu.Lock()
		type entry struct {
			s    *Session
			dirs []string
		}
		var all []entry
		for s, d := range c.watched {
			all = append(all, entry{s, d})
		}
		c.mu.Unlock()
		for _, e := range all {
			var used int64
			for _, d := range e.dirs {
				used += diskUsage(d)
			}
			if used > max {
				c.forget(e.dirs)
				e.s.abort(fmt.Sprintf("its workspace and temp folder hold %d bytes, over the cap of %d (sandbox.workspace_max)", used, max))
			}
		}
	}
}

// diskUsage is the space the files under dir take, by their blocks.
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// janitor runs the removals of ended spawns — cgroups, temp folders,
// workspaces — one after another, off the path of their exits. Its
// goroutine starts with the first job and ends with close, which first
// runs what is queued.
type janitor struct {
	mu     sync.Mutex
	jobs   chan func()
	done   chan struct{}
	closed bool
}

// do queues f; after close it runs f at once.
func (j *janitor) do(f func()) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		f()
		return
	}
	if j.jobs == nil {
		jobs, done := make(chan func(), 1024), make(chan struct{})
		j.jobs, j.done = jobs, done
		go func() { // owned by close
			defer close(done)
			for f := range jobs {
				f()
			}
		}()
	}
	select {
	case j.jobs <- f:
		j.mu.Unlock()
	default: // a backlog: this exit waits for its own removal
		j.mu.Unlock()
		f()
	}
}

// close runs what is queued and stops the goroutine.
func (j *janitor) close() {
	j.mu.Lock()
	j.closed = true
	jobs, done := j.jobs, j.done
	j.jobs = nil
	j.mu.Unlock()
	if jobs != nil {
		close(jobs)
		<-done
	}
}
