package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/store"
)

func newStateCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Back up and restore clihostd's state database (state.db)",
		Long: `state backs up the running daemon's state database (installs, setups, logins, sealed secrets)
and restores one while the daemon is stopped. Check a database with clihostd --check-state.`,
	}
	cmd.AddCommand(newStateBackupCmd(g), newStateRestoreCmd(g))
	return cmd
}

func newStateBackupCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the running daemon's state.db to FILE (mode 0600), online",
		Long: `backup asks the running clihostd for a consistent copy of its state database (bbolt's online
Tx.WriteTo: calls and installs go on meanwhile), writes it to FILE with mode 0600, checks the copy with
bbolt's consistency check and only then gives it its name. FILE must not exist. Root or the daemon's
own user only: the copy holds every install, setup and login record and the sealed secrets (the key
to them, secrets.key, is not in it: back it up apart).`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			n, err := backupState(ctx, g.client(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "state backed up to %s (%d bytes, consistent)\n", args[0], n)
			return nil
		},
	}
}

// backupState streams the daemon's state.db into a new 0600 file beside dst, checks it and renames
// it to dst.
func backupState(ctx context.Context, c *control.Client, dst string) (int64, error) {
	if _, err := os.Lstat(dst); err == nil {
		return 0, fmt.Errorf("state backup: %s exists: choose a new name", dst)
	}
	tmp := dst + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("state backup: %w", err)
	}
	n, err := c.StateBackup(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_, err = store.CheckFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("state backup to %s: %w", dst, err)
	}
	return n, nil
}

func newStateRestoreCmd(g *globalOptions) *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace state.db with a backup, while clihostd is stopped",
		Long: `restore checks the backup FILE with bbolt's consistency check, refuses while a clihostd (or
anything else) holds the state directory's lock, keeps the current state.db as
state.db.broken-<time> and puts a copy of FILE in its place (mode 0600, owned like the state
directory). Start clihostd again afterwards.`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if stateDir == "" {
				var err error
				if stateDir, err = control.DefaultStateDir(); err != nil {
					return err
				}
			}
			kept, err := restoreState(args[0], stateDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "restored %s from %s", filepath.Join(stateDir, store.DBFile), args[0])
			if kept != "" {
				fmt.Fprintf(g.stdout, "; the previous one is kept as %s", kept)
			}
			fmt.Fprintln(g.stdout, "; start clihostd again")
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state", "", "clihostd's state directory (default: as clihostd's)")
	return cmd
}

// restoreState puts a checked copy of backup in place of <dir>/state.db under the state database's
// lock, keeping the old file as state.db.broken-<time>; it returns that name ("" when there was none).
func restoreState(backup, dir string) (string, error) {
	if _, err := store.CheckFile(backup); err != nil {
		return "", fmt.Errorf("state restore: the backup is not usable: %w", err)
	}
	db := filepath.Join(dir, store.DBFile)
	unlock, err := lockState(db)
	if err != nil {
		return "", err
	}
	defer unlock()
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("state restore: %w", err)
	}
	tmp := filepath.Join(dir, store.DBFile+".restoring")
	_ = os.Remove(tmp) // left by an interrupted restore; we hold the lock
	if err := copyPrivate(backup, tmp, st.Sys().(*syscall.Stat_t)); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("state restore: %w", err)
	}
	if _, err := store.CheckFile(tmp); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("state restore: the copy is not usable: %w", err)
	}
	kept := ""
	if _, err := os.Lstat(db); err == nil {
		kept = db + ".broken-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(db, kept); err != nil {
			_ = os.Remove(tmp)
			return "", fmt.Errorf("state restore: keep the old database: %w", err)
		}
	}
	if err := os.Rename(tmp, db); err != nil {
		return kept, fmt.Errorf("state restore: %w (the old database is %s)", err, kept)
	}
	return kept, syncDir(dir)
}

// lockState takes the flock clihostd holds on state.db while it runs (bbolt's), without waiting:
// a running daemon makes restore fail. A missing state.db or a directory in its place has no
// lock to take.
func lockState(db string) (unlock func(), err error) {
	f, err := os.Open(db)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EISDIR) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state restore: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state restore: %s is in use (a clihostd runs on %s): stop it first", db, filepath.Dir(db))
		}
		return nil, fmt.Errorf("state restore: lock %s: %w", db, err)
	}
	return func() { _ = f.Close() }, nil
}

// copyPrivate copies src to a new file dst with mode 0600, owned like owner, synced.
func copyPrivate(src, dst string, owner *syscall.Stat_t) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil && os.Getuid() == 0 {
		err = out.Chown(int(owner.Uid), int(owner.Gid))
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
