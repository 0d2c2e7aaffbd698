package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Attempts from the attack review of issue 10: kernel resources that are not per call.
func init() {
	cases["rlimit-core"] = raiseCoreLimit
	cases["inotify-hold"] = inotifyHold
	cases["inotify-one"] = inotifyOne
}

// raiseCoreLimit raises RLIMIT_CORE's soft limit to its hard limit. allowed means the CLI may now
// dump core (into its working directory, or to the host's core_pattern helper, which runs outside
// the sandbox); denied means the hard limit is 0.
func raiseCoreLimit([]string) report {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &rl); err != nil {
		return result("getrlimit", err)
	}
	if rl.Max == 0 {
		return report{Result: "denied", Step: "getrlimit", Detail: "hard core limit 0"}
	}
	rl.Cur = rl.Max
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &rl); err != nil {
		return result("setrlimit", err)
	}
	return report{Result: "allowed", Step: "setrlimit", Detail: "core limit raised to " + strconv.FormatUint(rl.Max, 10)}
}

// inotifyHold N MARKER MS creates inotify instances until the kernel refuses one or N exist, writes
// MARKER, and holds them for MS milliseconds. Its detail is the count and the refusal.
func inotifyHold(args []string) report {
	if r := need(args, 3); r != nil {
		return *r
	}
	n, _ := strconv.Atoi(args[0])
	ms, _ := strconv.Atoi(args[2])
	made := 0
	var err error
	for ; made < n; made++ {
		if _, err = unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
			break
		}
	}
	if werr := os.WriteFile(args[1], []byte(strconv.Itoa(made)), 0o644); werr != nil {
		return result("write", werr)
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return report{Result: "allowed", Step: "inotify_init1", Detail: fmt.Sprintf("made %d: %v", made, err)}
}

// inotifyOne creates one inotify instance (run outside the sandbox, as the agent's uid).
func inotifyOne([]string) report {
	_, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	return result("inotify_init1", err)
}
