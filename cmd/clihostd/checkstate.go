package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/store"
)

// checkState is --check-state: it checks <state>/state.db read-only with bbolt's consistency check,
// prints a report and returns 0 when it is consistent, 1 otherwise (damaged, missing, or held by a
// running clihostd, whose own start-up check then stands).
var _ control.StateBackend = (*daemon)(nil)

func checkState(stdout, stderr io.Writer, stateDir string) int {
	if stateDir == "" {
		var err error
		if stateDir, err = control.DefaultStateDir(); err != nil {
			fmt.Fprintf(stderr, "clihostd: %v\n", err)
			return 1
		}
	}
	path := filepath.Join(stateDir, store.DBFile)
	rep, err := store.CheckFile(path)
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			err = fmt.Errorf("%w (a running clihostd holds it: it checked it when it started; ask it with `clihostctl doctor`)", err)
		}
		fmt.Fprintf(stderr, "clihostd: check-state: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: consistent (%d bytes, %d pages)\n", rep.Path, rep.Size, rep.Pages)
	names := make([]string, 0, len(rep.Keys))
	for n := range rep.Keys {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(stdout, "  %-8s %d records\n", n, rep.Keys[n])
	}
	return 0
}

// BackupState writes a consistent copy of state.db to w (control.StateBackend).
func (d *daemon) BackupState(w io.Writer) (int64, error) { return d.store.Backup(w) }

// CheckState runs bbolt's consistency check on the open state.db (control.StateBackend).
func (d *daemon) CheckState() error { return d.store.Check() }

// StateFile is the state database's path (control.StateBackend).
func (d *daemon) StateFile() string { return d.store.Path() }
