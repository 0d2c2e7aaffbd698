package nsinit

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// TestSysctlWriteKeepsTheNamespaceRemountable (DEFECT on 4dd1568, CI76). A zygote thread sets
// tcp_no_metrics_save while it prepares (zygote_net.go); the descriptor it opens for writing
// is in the zygote's one descriptor table, and every process another thread clones meanwhile (a
// call's PID 1, a program before its exec) holds a copy of it for a moment. When that copy was
// on a mount of the thread's namespace, the call's remount of everything read-only
// (buildNamespaces) failed with EBUSY: "sandbox unavailable: mount: make everything read-only:
// device or resource busy", one call in a few hundred under load. Here one thread writes the
// sysctl in a namespace of its own and remounts it read-only, again and again, while another
// forks and execs without pause.
func TestSysctlWriteKeepsTheNamespaceRemountable(t *testing.T) {
	requireRoot(t)
	var stop atomic.Bool
	forks := make(chan int)
	go func() {
		n := 0
		for !stop.Load() {
			pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
			if err == nil {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, 0, nil)
				n++
			}
		}
		forks <- n
	}()
	defer func() {
		stop.Store(true)
		t.Logf("%d forks meanwhile", <-forks)
	}()
	const rounds = 3000
	inOwnNetNamespace(t, func() error {
		ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		for i := range rounds {
			if err := writeSysctl("net/ipv4/tcp_no_metrics_save", "1"); err != nil {
				return err
			}
			if err := unix.MountSetattr(unix.AT_FDCWD, "/proc", 0, ro); err != nil {
				if errors.Is(err, unix.EBUSY) {
					t.Errorf("round %d of %d: the namespace's /proc could not turn read-only (EBUSY) after the sysctl was written", i+1, rounds)
					return nil
				}
				return err
			}
			if err := unix.MountSetattr(unix.AT_FDCWD, "/proc", 0, rw); err != nil {
				return err
			}
		}
		return nil
	})
}

// inOwnNetNamespace runs fn on a thread of its own in new mount and network namespaces, with a
// fresh /proc (as a zygote thread's, whose /proc is its PID 1's procfs), and fails t with fn's
// error. It skips t where namespaces cannot be made. The thread ends with fn.
func inOwnNetNamespace(t *testing.T, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, in namespaces of its own, ends with the goroutine
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWNET); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
				return err
			}
			if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
				return err
			}
			return fn()
		}()
	}()
	if err := <-errc; err != nil {
		if errors.Is(err, os.ErrPermission) {
			fixture.Missing(t, "namespaces: %v", err)
		}
		t.Fatal(err)
	}
}
