package daemon

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/clihost/clihost/registry"
)

// watchBundles reloads when files under the bundle directories change (debounced). The built-in
// catalog never changes. It returns a function that stops watching.
func (d *Engine) watchBundles(ctx context.Context) func() {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		d.log.Warn("not watching bundle files; reload with SIGHUP", "err", err)
		return func() {}
	}
	dirs := []string(d.cfg.Bundles)
	if len(dirs) == 0 {
		dirs = filepath.SplitList(os.Getenv(registry.EnvBundles))
		if len(dirs) == 0 || dirs[0] == "" {
			dirs = []string{registry.LocalDir}
		}
	}
	for _, root := range dirs {
		_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				_ = w.Add(p)
			}
			return nil
		})
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer w.Close()
		var fire <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Has(fsnotify.Create) {
					if st, err := os.Stat(ev.Name); err == nil && st.IsDir() {
						_ = w.Add(ev.Name)
					}
				}
				fire = time.After(300 * time.Millisecond)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				d.log.Warn("watching bundle files", "err", err)
			case <-fire:
				fire = nil
				d.log.Info("reloading bundles (files changed)")
				if err := d.Reload(); err != nil {
					d.log.Error("reload failed; keeping the previous bundles", "err", err)
				}
			}
		}
	}()
	return cancel
}
