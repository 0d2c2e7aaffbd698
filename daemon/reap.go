package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/sandbox/cgroup"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// sandboxOwner is the owner tag of the sandboxes a daemon on stateDir starts (nsinit.SetOwner):
// "clihostd-" and the first 16 hex digits of the SHA-256 of the state directory's absolute path.
// Two daemons on one host have different state directories (each holds its store's lock), so
// neither ever takes the other's sandboxes for its own.
func sandboxOwner(stateDir string) (string, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	return "clihostd-" + hex.EncodeToString(sum[:8]), nil
}

// reapLeftovers kills the sandboxes a previous daemon on this state directory left running, and
// tags every sandbox this daemon starts so that a later one can do the same; then it removes the
// call control groups whose owner process is gone (any daemon's or in-process clihostctl's), with
// whatever still runs in them, the temporary folders of container calls and version checks whose
// process is gone (host.ReapTempFolders) and what interrupted installs downloaded
// (install.RemoveInterrupted). A sandbox dies with
// the daemon that started it (see package sandbox/nsinit), so there are none unless that failed;
// this is the last guard. It kills every sandbox init whose command line is "clihost-sandbox
// __clihost_init <tag>" with this state directory's tag (sandboxOwner), and the zygote and the
// PID 1s it forked ("clihost-sandbox __clihost_zygote <tag>"); the kernel then kills everything
// else in each sandbox (its PID namespace). It must run once the store's lock is held:
// then no live daemon owns sandboxes with this tag. It reports how many it killed in the log.
func (d *Engine) reapLeftovers() error {
	tag, err := sandboxOwner(d.stateDir)
	if err != nil {
		return err
	}
	n, err := nsinit.KillLeftovers(tag)
	if err != nil {
		return fmt.Errorf("reap the sandboxes a previous daemon left: %w", err)
	}
	if n > 0 {
		d.log.Warn("killed sandboxes a previous daemon on this state directory left running", "count", n, "owner", tag)
	}
	removed, err := cgroup.Default().Reap()
	logReaped(d.log, removed, err)
	if folders, err := host.ReapTempFolders(); len(folders) > 0 || err != nil {
		d.log.Warn("removed the temporary folders of container calls and version checks whose owner is gone", "folders", folders, "err", err)
	}
	if dirs, err := install.RemoveInterrupted(d.stateDir); len(dirs) > 0 || err != nil {
		d.log.Warn("removed what interrupted installs had downloaded", "dirs", dirs, "err", err)
	}
	return nsinit.SetOwner(tag)
}

// logReaped logs the control groups Reap removed, and its error when it had one.
func logReaped(log *slog.Logger, removed []string, err error) {
	if len(removed) > 0 {
		log.Warn("removed the control groups of calls whose owner is gone", "groups", removed)
	}
	if err != nil {
		log.Warn("could not remove every control group of calls whose owner is gone", "err", err)
	}
}
