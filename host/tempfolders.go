package host

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// containerDirPrefix starts the name of an engine: sandbox call's own folder in the temporary
// folder (the env file, the empty file and folder the mounts use, conmon's working directory),
// followed by the pid of the process that made it and "-": clihost-container-<pid>-<random>.
const containerDirPrefix = "clihost-container-"

// checkDirPrefix starts the name of the folder a version check runs in when its uid may use
// neither the workspace nor a home (checkDir), followed by the pid of the process that made it and
// "-": clihost-check-<pid>-<random>, owned by the check's uid.
const checkDirPrefix = "clihost-check-"

// ReapTempFolders removes the temporary folders of calls and version checks whose process is gone:
// each clihost-container-<pid>-* and clihost-check-<pid>-* directory in the temporary folder
// ($TMPDIR, else /tmp) whose pid is not a running process, when this uid owns it or is root (a root
// daemon gives a check's folder to the uid the check runs as). A call or check removes its folder
// when it ends; a daemon killed during one (SIGKILL, a crash, the OOM killer) leaves it, with a
// container call's env file or what the check's CLI wrote. Folders of live processes (this one,
// another daemon or clihostctl sharing the temporary folder, or a process that took a dead one's
// pid) are left alone. It returns the paths removed; clihostd calls it at start.
func ReapTempFolders() ([]string, error) {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), containerDirPrefix)
		if !ok {
			rest, ok = strings.CutPrefix(e.Name(), checkDirPrefix)
		}
		if !ok || !e.IsDir() { // DirEntry.IsDir is false for a symbolic link
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue
		}
		p := filepath.Join(tmp, e.Name())
		st, err := os.Lstat(p)
		if err != nil || !st.IsDir() {
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || (int(sys.Uid) != os.Geteuid() && os.Geteuid() != 0) {
			continue // another user's: not ours to remove
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
