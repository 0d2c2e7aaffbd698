package daemon

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// TimerSlack is clihostd's timer slack: how late the kernel may wake its threads from a timed
// sleep. While a call waits on its sandbox, the Go runtime's monitor thread wakes every 20 µs,
// about 70 µs with Linux's default slack of 50 µs: some 20 wake-ups a call, each taking a CPU
// from the calls. Its deadlines are milliseconds, and the network poller's timers are rounded to
// milliseconds anyway, so 250 µs costs nothing and saves most of them.
const TimerSlack = 250 * time.Microsecond

// RaiseTimerSlack gives every thread of this process TimerSlack, unless it has a larger slack
// already (the service manager's TimerSlackNSec=); threads started later inherit it. It reports
// whether every thread has it now: another thread's slack can be set only with CAP_SYS_NICE (a
// root daemon), so a daemon that is not root relies on its unit's TimerSlackNSec=. The processes
// the daemon starts through the runner and the sandbox start with Linux's default
// (spawn.DefaultTimerSlack).
func RaiseTimerSlack() bool {
	ns := TimerSlack.Nanoseconds()
	runtime.LockOSThread() // self stays the thread prctl sets
	defer runtime.UnlockOSThread()
	self := unix.Gettid()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false
	}
	all := true
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if tid == self {
			if cur, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil && int64(cur) < ns {
				all = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(ns), 0, 0, 0) == nil && all
			}
			continue
		}
		file := "/proc/" + t.Name() + "/timerslack_ns" // a thread's, by its id (not under task/)
		if b, err := os.ReadFile(file); err == nil {
			if cur, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && cur >= ns {
				continue
			}
		}
		all = os.WriteFile(file, []byte(strconv.FormatInt(ns, 10)), 0) == nil && all
	}
	return all
}
