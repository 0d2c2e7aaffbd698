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

// ReapContainerFolders removes the folders of engine: sandbox calls whose process is gone: each
// clihost-container-<pid>-* directory in the temporary folder ($TMPDIR, else /tmp) that this uid
// owns and whose pid is not a running process. A call removes its folder when it ends; a daemon
// killed during one (SIGKILL, a crash, the OOM killer) leaves it, with the call's env file. Folders
// of live processes (this one, another daemon or clihostctl sharing the temporary folder, or a
// process that took a dead one's pid) are left alone. It returns the paths removed; clihostd calls
// it at start.
func ReapContainerFolders() ([]string, error) {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), containerDirPrefix)
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
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
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
