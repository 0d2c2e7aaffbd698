package main

import (
	"context"
	"encoding/json"
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

// stateOptions are the flags and argument of state backup and state restore.
type stateOptions struct {
	*globalOptions
	file     string // the backup
	stateDir string // restore: the state directory ("" for clihostd's default)
	force    bool   // restore: without the secrets that do not open
	asJSON   bool
}

func newStateBackupCmd(g *globalOptions) *cobra.Command {
	o := &stateOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the running daemon's state.db to FILE (mode 0600), online",
		Long: `backup asks the running clihostd for a consistent copy of its state database (bbolt's online
Tx.WriteTo: calls and installs go on meanwhile), writes it to FILE with mode 0600, checks the copy with
bbolt's consistency check and only then gives it its name. FILE must not exist. Root or the daemon's
own user only: the copy holds every install, setup and login record and the sealed secrets (the key
to them, secrets.key, is not in it: back it up apart).`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.file = args[0]
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			return runStateBackup(ctx, o)
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON: {file, bytes}")
	return cmd
}

// runStateBackup copies the daemon's state.db to o.file.
func runStateBackup(ctx context.Context, o *stateOptions) error {
	n, err := backupState(ctx, o.client(), o.file)
	if err != nil {
		return err
	}
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(map[string]any{"file": o.file, "bytes": n})
	}
	fmt.Fprintf(o.io.Out, "state backed up to %s (%d bytes, consistent)\n", o.file, n)
	return nil
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
	o := &stateOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace state.db with a backup, while clihostd is stopped",
		Long: `restore checks the backup FILE with bbolt's consistency check and checks that the state
directory's secrets.key opens the secrets sealed in it (a backup from another host, or from before
the key file was replaced, does not: restore the secrets.key kept with that backup first, or pass
--force to restore without its secrets). It refuses while a clihostd (or anything else) holds the
state directory's lock, keeps the current state.db beside it as state.db.replaced-<time> (or
state.db.broken-<time> when it fails the consistency check) and puts a copy of FILE in its place
(mode 0600, owned like the state directory). Nothing is replaced when a check fails. Start
clihostd again afterwards.`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.file = args[0]
			return runStateRestore(o)
		},
	}
	cmd.Flags().StringVar(&o.stateDir, "state", "", "clihostd's state directory (default: as clihostd's)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON: {restored, from, kept, dropped_secrets}")
	cmd.Flags().BoolVar(&o.force, "force", false, "restore a backup whose secrets do not open with the state directory's secrets.key, dropping those secrets (every setup is then redone)")
	return cmd
}

// runStateRestore puts the backup o.file in place of the state directory's state.db.
func runStateRestore(o *stateOptions) error {
	stateDir := o.stateDir
	if stateDir == "" {
		var err error
		if stateDir, err = control.DefaultStateDir(); err != nil {
			return err
		}
	}
	res, err := restoreState(o.file, stateDir, o.force)
	if err != nil {
		return err
	}
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(restoredJSON{Restored: filepath.Join(stateDir, store.DBFile), From: o.file, Kept: res.kept, DroppedSecrets: max(res.dropped, 0)})
	}
	fmt.Fprintf(o.io.Out, "restored %s from %s", filepath.Join(stateDir, store.DBFile), o.file)
	if res.kept != "" {
		fmt.Fprintf(o.io.Out, "; the previous one is kept as %s", res.kept)
	}
	if res.dropped >= 0 {
		fmt.Fprintf(o.io.Out, "; --force: its %d sealed secrets were dropped (they do not open with %s) and every bundle's setup is pending again",
			res.dropped, filepath.Join(stateDir, keyFileName))
	}
	fmt.Fprintln(o.io.Out, "; start clihostd again")
	return nil
}

// restoredJSON is state restore --json's output.
type restoredJSON struct {
	Restored       string `json:"restored"`
	From           string `json:"from"`
	Kept           string `json:"kept,omitempty"`
	DroppedSecrets int    `json:"dropped_secrets"`
}

// keyFileName is the secrets key's name in the state directory (as clihostd opens it).
const keyFileName = "secrets.key"

// restoreResult is what restoreState did.
type restoreResult struct {
	kept    string // where the replaced state.db went; "" when there was none
	dropped int    // secrets dropped under --force; -1 when none were
}

// restoreState puts a checked copy of backup in place of <dir>/state.db under the state database's
// lock, keeping the old file beside it (restoreResult.kept). A backup that fails bbolt's check, or
// whose sealed secrets do not open with <dir>/secrets.key, is refused before anything changes;
// force restores the latter with its secrets and setup ledgers dropped.
func restoreState(backup, dir string, force bool) (restoreResult, error) {
	res := restoreResult{dropped: -1}
	if _, err := store.CheckFile(backup); err != nil {
		return res, fmt.Errorf("state restore: the backup is not usable: %w", err)
	}
	dropSecrets, err := checkBackupKey(backup, dir, force)
	if err != nil {
		return res, err
	}
	db := filepath.Join(dir, store.DBFile)
	keptAs := "replaced"
	if _, err := store.CheckFile(db); errors.Is(err, store.ErrCorrupt) {
		keptAs = "broken"
	}
	unlock, err := lockState(db)
	if err != nil {
		return res, err
	}
	defer unlock()
	st, err := os.Stat(dir)
	if err != nil {
		return res, fmt.Errorf("state restore: %w", err)
	}
	tmp := filepath.Join(dir, store.DBFile+".restoring")
	_ = os.Remove(tmp) // left by an interrupted restore; we hold the lock
	if err := prepareCopy(backup, tmp, st.Sys().(*syscall.Stat_t), dropSecrets, &res); err != nil {
		_ = os.Remove(tmp)
		return res, err
	}
	if _, err := os.Lstat(db); err == nil {
		if res.kept, err = keepAside(db, keptAs); err != nil {
			_ = os.Remove(tmp)
			return res, fmt.Errorf("state restore: keep the old database: %w", err)
		}
	}
	if err := os.Rename(tmp, db); err != nil {
		return res, fmt.Errorf("state restore: %w (the old database is %s)", err, res.kept)
	}
	return res, syncDir(dir)
}

// checkBackupKey refuses a backup whose sealed secrets do not open with <dir>/secrets.key (or that
// holds secrets while there is no key file), unless force; it reports whether they must be dropped.
func checkBackupKey(backup, dir string, force bool) (drop bool, err error) {
	keyFile := filepath.Join(dir, keyFileName)
	kc, err := store.CheckSecretsKey(backup, keyFile)
	mismatch := errors.Is(err, store.ErrDecrypt) || errors.Is(err, os.ErrNotExist)
	switch {
	case err == nil:
		return false, nil
	case !mismatch:
		return false, fmt.Errorf("state restore: %w", err)
	case force:
		return true, nil
	}
	return false, fmt.Errorf("state restore: refused, nothing was changed: %w. The backup %s holds %d sealed secrets that %s cannot open "+
		"(a backup from another host, or from before the key file was replaced). Put the secrets.key that was backed up with it in place "+
		"as %s (mode 0600) and restore again, or pass --force to restore without those secrets (they are dropped and every bundle's "+
		"setup is redone)", err, backup, kc.Sealed, keyFile, keyFile)
}

// prepareCopy copies backup to tmp (see copyPrivate), drops its secrets when asked, and checks it.
func prepareCopy(backup, tmp string, owner *syscall.Stat_t, dropSecrets bool, res *restoreResult) error {
	if err := copyPrivate(backup, tmp, owner); err != nil {
		return fmt.Errorf("state restore: %w", err)
	}
	if dropSecrets {
		n, err := store.DropSecrets(tmp)
		if err != nil {
			return fmt.Errorf("state restore: drop the secrets from the copy: %w", err)
		}
		res.dropped = n
	}
	if _, err := store.CheckFile(tmp); err != nil {
		return fmt.Errorf("state restore: the copy is not usable: %w", err)
	}
	return nil
}

// keepAside renames db to db.<what>-<time> (with a counter when that name is taken: a kept
// database is never overwritten) and returns the new name.
func keepAside(db, what string) (string, error) {
	base := db + "." + what + "-" + time.Now().UTC().Format("20060102T150405Z")
	for i := 0; ; i++ {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s.%d", base, i)
		}
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			return name, os.Rename(db, name)
		}
	}
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
