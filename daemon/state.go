package daemon

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/store"
)

// CheckStateFile is clihostd --check-state: it checks <stateDir>/state.db read-only with bbolt's
// consistency check and writes a report to w. It fails when the file is damaged, missing, of a
// schema version this binary does not know, or held by a running clihostd (whose own start-up
// check then stands). stateDir "" is control.DefaultStateDir.
func CheckStateFile(w io.Writer, stateDir string) error {
	if stateDir == "" {
		var err error
		if stateDir, err = control.DefaultStateDir(); err != nil {
			return err
		}
	}
	rep, err := store.CheckFile(filepath.Join(stateDir, store.DBFile))
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			err = fmt.Errorf("%w (a running clihostd holds it: it checked it when it started; ask it with `clihostctl doctor`)", err)
		}
		return fmt.Errorf("check-state: %w", err)
	}
	fmt.Fprintf(w, "%s: consistent (%d bytes, %d pages, storage version %d)\n", rep.Path, rep.Size, rep.Pages, rep.Version)
	for _, n := range slices.Sorted(maps.Keys(rep.Keys)) {
		fmt.Fprintf(w, "  %-8s %d records\n", n, rep.Keys[n])
	}
	if rep.Version < store.SchemaVersion {
		fmt.Fprintf(w, "storage version %d is older than this clihostd's %d: clihostd migrates it when it next starts\n", rep.Version, store.SchemaVersion)
	}
	return nil
}

// BackupState writes a consistent copy of state.db to w (control.StateBackend).
func (d *Engine) BackupState(w io.Writer) (int64, error) { return d.store.Backup(w) }

// CheckState runs bbolt's consistency check on the open state.db (control.StateBackend).
func (d *Engine) CheckState() error { return d.store.Check() }

// StateVersion is the open state.db's storage version (control.StateBackend).
func (d *Engine) StateVersion() int {
	v, _ := d.store.Version()
	return v
}

// StateFile is the state database's path (control.StateBackend).
func (d *Engine) StateFile() string { return d.store.Path() }
