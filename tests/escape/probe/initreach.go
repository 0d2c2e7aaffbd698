package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func init() { cases["init-reach"] = initReach }

// reachOps are the ways initReach tries to reach into a task, in the order it tries them (the
// signals last: a SIGKILL that gets through ends a control child).
var reachOps = []string{"ptrace", "mem", "environ", "root", "cwd", "fd", "ns", "signal", "kill"}

// initReach TARGET tries to reach into every thread of a process from inside the sandbox: "1",
// the sandbox's init (which forked the probe from one confined thread, while its other threads
// run the Go runtime), or "child", a child the probe forks first (the positive control: the same
// attempts on a process of the probe's own that nothing protects). For the process itself
// (/proc/PID) and for each of its threads (/proc/PID/task/TID) it tries, in turn: PTRACE_SEIZE;
// opening mem and reading environ; opening what the root and cwd links lead to; listing fd and
// opening fd/0; opening ns/mnt; signal 0 (the kernel's permission check alone) and SIGKILL with
// tgkill (to a PID namespace's init from inside it, SIGKILL is dropped once permitted). Each
// attempt is made on every target before the next attempt.
//
// Each line of the detail is "TARGET ROLE uid=UID OP RESULT": TARGET is "PID" or "PID/TID", ROLE
// "forker" for the thread whose children list the probe (the one that forked it), "process" for
// /proc/PID and "thread" otherwise, UID the target's real, effective, saved and filesystem uids
// (from its status), RESULT "ok" or the errno. A last line "parent PPID afterwards" tells whether
// the probe still has its parent. result is allowed when any attempt got through.
func initReach(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	pid := 1
	if args[0] == "child" {
		child, r := lingeringChild()
		if r != nil {
			return *r
		}
		defer func() {
			unix.Kill(child, unix.SIGKILL)
			var ws unix.WaitStatus
			unix.Wait4(child, &ws, 0, nil)
		}()
		pid = child
	} else if args[0] != "1" {
		return report{Result: "denied", Step: "probe", Detail: "unknown target " + args[0]}
	}
	tids, err := taskIDs(pid)
	if err != nil {
		return result("list tasks", err)
	}
	targets := append([]int{0}, tids...)
	var lines []string
	reached := false
	for _, op := range reachOps {
		for _, target := range targets {
			name, dir, role := taskNames(pid, target)
			err := reach(op, dir, pid, target)
			res := "ok"
			if err != nil {
				res = errName(err)
			} else {
				reached = true
			}
			lines = append(lines, fmt.Sprintf("%s %s uid=%s %s %s", name, role, statusField(dir, "Uid"), op, res))
		}
	}
	time.Sleep(50 * time.Millisecond) // a signal that got through has been acted on
	lines = append(lines, fmt.Sprintf("parent %d afterwards", os.Getppid()))
	r := report{Result: "denied", Step: "reach", Detail: strings.Join(lines, "\n")}
	if reached {
		r.Result = "allowed"
	}
	return r
}

// taskNames returns the name, /proc directory and role of the thread tid of pid (the process
// itself when tid is 0).
func taskNames(pid, tid int) (name, dir, role string) {
	if tid == 0 {
		return strconv.Itoa(pid), fmt.Sprintf("/proc/%d", pid), "process"
	}
	dir = fmt.Sprintf("/proc/%d/task/%d", pid, tid)
	role = "thread"
	if forked(dir) {
		role = "forker"
	}
	return fmt.Sprintf("%d/%d", pid, tid), dir, role
}

// lingeringChild forks a child that only waits (a raw clone, no exec, as in linger) and returns
// its pid.
func lingeringChild() (int, *report) {
	pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 {
		r := result("clone", errno)
		return 0, &r
	}
	if pid == 0 {
		for {
			unix.RawSyscall6(unix.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
		}
	}
	return int(pid), nil
}

// taskIDs lists the threads of process pid.
func taskIDs(pid int) ([]int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// forked reports whether the thread at dir (/proc/PID/task/TID) is the one that forked the probe.
func forked(dir string) bool {
	data, err := os.ReadFile(dir + "/children")
	return err == nil && slices.Contains(strings.Fields(string(data)), strconv.Itoa(os.Getpid()))
}

// statusField is the field key of dir's status with its tabs turned into commas, "?" when it
// cannot be read.
func statusField(dir, key string) string {
	data, err := os.ReadFile(dir + "/status")
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.Join(strings.Fields(v), ",")
		}
	}
	return "?"
}

// reach makes the attempt op on the task at dir (the thread tid of pid, or the process when tid
// is 0).
func reach(op, dir string, pid, tid int) error {
	id := tid
	if id == 0 {
		id = pid
	}
	switch op {
	case "ptrace":
		return unix.PtraceSeize(id)
	case "mem":
		return openClose(dir+"/mem", unix.O_RDONLY)
	case "environ":
		_, err := os.ReadFile(dir + "/environ")
		return err
	case "root", "cwd":
		return openClose(dir+"/"+op+"/", unix.O_PATH|unix.O_DIRECTORY)
	case "fd":
		if _, err := os.ReadDir(dir + "/fd"); err != nil {
			return err
		}
		return openClose(dir+"/fd/0", unix.O_PATH)
	case "ns":
		return openClose(dir+"/ns/mnt", unix.O_RDONLY)
	case "signal", "kill":
		sig := unix.Signal(0)
		if op == "kill" {
			sig = unix.SIGKILL
		}
		if tid == 0 {
			return unix.Kill(pid, sig)
		}
		return unix.Tgkill(pid, tid, sig)
	}
	return fmt.Errorf("unknown attempt %s", op)
}

// openClose opens path with flags and closes it.
func openClose(path string, flags int) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// errName is err's errno name, or its text.
func errName(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return strings.ReplaceAll(err.Error(), " ", "_")
}
