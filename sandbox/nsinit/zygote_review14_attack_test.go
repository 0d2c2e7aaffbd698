package nsinit

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// Review 14 (commit 42ca0a0): the zygote's threads write tcp_no_metrics_save through a detached
// clone of their /proc (writeSysctl), so that a copy of that descriptor in a process another thread
// clones meanwhile keeps no mount of the thread's namespace busy. These attacks check, with real
// concurrent calls through the zygote, that (a) no program of any call ever starts with a
// descriptor of the zygote (the detached procfs clone, the sysctl, or anything else another
// thread had open at its clone), and (b) no call fails its remount of everything read-only
// (EBUSY) under concurrency: any remaining writer on a mount of a thread's namespace would show
// up as "mount: make everything read-only" (or another mount step) failing.

// TestReview14ConcurrentCallsGetNoZygoteDescriptorAndAlwaysRemount runs rounds of concurrent calls
// (each without a NetworkKey, so every prepared thread makes a fresh network namespace and writes
// the sysctl while other threads clone PID 1s and programs). Each program lists its shell's
// descriptors: only 0, 1 and 2 may be there. Every call must succeed.
func TestReview14ConcurrentCallsGetNoZygoteDescriptorAndAlwaysRemount(t *testing.T) {
	pool := newPoolFor(t, PoolConfig{Max: 4})
	waitZygote(t, pool)
	const workers, rounds = 6, 200
	var mu sync.Mutex
	var failures, leaks []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				r := runQuiet(t, pool, sh(t, "ls /proc/$$/fd", "/bin/ls"))
				mu.Lock()
				switch fds := strings.Fields(r.stdout); {
				case r.code != 0 || r.failure != nil:
					failures = append(failures, fmt.Sprintf("worker %d call %d: exit %d, failure %v, stderr %q", w, i, r.code, r.failure, r.stderr))
				case !slices.Equal(fds, []string{"0", "1", "2"}):
					leaks = append(leaks, fmt.Sprintf("worker %d call %d: fds %v", w, i, fds))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls, %d failed, %d with extra descriptors", workers*rounds, len(failures), len(leaks))
	for _, f := range failures {
		t.Errorf("a call failed under concurrency: %s", f)
	}
	for _, l := range leaks {
		t.Errorf("a program started with a descriptor that is not its own: %s", l)
	}
}

// runQuiet is runPooled without the per-call log (hundreds of calls).
func runQuiet(t testing.TB, pool *Pool, p isolation.Plan) result {
	t.Helper()
	cmd, stdio := takeReady(t, pool, p, false)
	return finishPooled(t, cmd, stdio)
}

// TestReview14SysctlWriteLeavesNoDescriptorNorMount: writeSysctl, in a thread with mount and
// network namespaces of its own (as a zygote thread's), leaves no descriptor open in the process
// (a detached procfs clone kept open would pin the procfs and its PID namespace) and adds no
// mount to the thread's mount table; the namespace's /proc can then turn read-only.
func TestReview14SysctlWriteLeavesNoDescriptorNorMount(t *testing.T) {
	requireRoot(t)
	inOwnNetNamespace(t, func() error {
		fdsBefore, mountsBefore := review14Counts()
		for range 50 {
			if err := writeSysctl("net/ipv4/tcp_no_metrics_save", "1"); err != nil {
				return err
			}
		}
		fdsAfter, mountsAfter := review14Counts()
		// Another goroutine (a pooled run's refiller reads the mount table) may hold a procfs
		// file a moment; a descriptor the writes left stays.
		for range 50 {
			if fdsAfter <= fdsBefore {
				break
			}
			time.Sleep(10 * time.Millisecond)
			fdsAfter, _ = review14Counts()
		}
		if fdsAfter > fdsBefore {
			t.Errorf("procfs descriptors: %d before 50 sysctl writes, %d after", fdsBefore, fdsAfter)
		}
		if mountsAfter != mountsBefore {
			t.Errorf("mounts of the thread's namespace: %d before, %d after", mountsBefore, mountsAfter)
		}
		ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(unix.AT_FDCWD, "/proc", 0, ro); err != nil {
			t.Errorf("the namespace's /proc cannot turn read-only after the writes: %v", err)
		}
		return nil
	})
}

// review14Counts returns the number of the process's descriptors of a procfs (not all of them:
// the runtime opens its poller's at the first file this test opens) and of the calling thread's
// mounts.
func review14Counts() (fds, mounts int) {
	ents, _ := os.ReadDir("/proc/thread-self/fd")
	for _, e := range ents {
		var st unix.Statfs_t
		if fd, err := strconv.Atoi(e.Name()); err == nil && unix.Fstatfs(fd, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC {
			fds++
		}
	}
	info, _ := os.ReadFile("/proc/thread-self/mountinfo")
	return fds, strings.Count(string(info), "\n")
}
