package wasm

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the folders must be quiet before a rescan: copying a
// module in takes several writes, and the rescan should see the last.
const settle = 200 * time.Millisecond

// watch follows the plugin folders and rescans them when a module or a
// manifest is created, written, renamed or removed. A drop-in folder that
// does not exist yet is created, so that dropping a plugin in works.
func (m *Manager) watch() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch the plugin folders: %w", err)
	}
	for _, f := range m.cfg.Folders {
		if !f.Builtin {
			if err := os.MkdirAll(f.Path, 0o700); err != nil {
				m.log.Warn("cannot create the plugin folder", "folder", f.Path, "err", err)
			}
		}
		if err := w.Add(f.Path); err != nil {
			if !os.IsNotExist(err) {
				m.log.Warn("cannot watch a plugin folder; changes there need a restart", "folder", f.Path, "err", err)
			}
		}
	}
	m.wg.Add(1)
	go func() { // owned by the manager: ends with Stop
		defer m.wg.Done()
		defer w.Close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if strings.HasSuffix(ev.Name, ".wasm") || strings.HasSuffix(ev.Name, ".toml") {
					timer.Reset(settle)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				m.log.Warn("watching the plugin folders", "err", err)
				timer.Reset(settle) // events may have been lost
			case <-timer.C:
				m.Rescan()
			}
		}
	}()
	return nil
}
