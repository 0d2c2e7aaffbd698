package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Attempts from the attack review of issue 10: kernel resources that are not per call.
func init() {
	cases["rlimit-core"] = raiseCoreLimit
	cases["proxy-conns"] = proxyConns
	cases["replace"] = replace
}

// replace PATH OLD NEW rewrites the file PATH with the first OLD replaced by NEW (allowed: the file
// now holds NEW).
func replace(args []string) report {
	if r := need(args, 3); r != nil {
		return *r
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return result("read", err)
	}
	if !strings.Contains(string(b), args[1]) {
		return report{Result: "denied", Step: "read", Detail: "no " + strconv.Quote(args[1]) + " in the file"}
	}
	return result("write", os.WriteFile(args[0], []byte(strings.Replace(string(b), args[1], args[2], 1)), 0o644))
}

// proxyConns K N MS forks K children (raw clone, no exec: the sandbox needs no exec grant) that
// each open up to N connections to the egress HTTP proxy (127.0.0.1:3128, served by clihost on the
// host) and hold them; the probe reports after MS milliseconds, and its children die with the
// sandbox. Each child has its own descriptor table, so the call may hold K × RLIMIT_NOFILE
// connections, each a descriptor (and a goroutine) in the host process.
func proxyConns(args []string) report {
	if r := need(args, 3); r != nil {
		return *r
	}
	k, _ := strconv.Atoi(args[0])
	n, _ := strconv.Atoi(args[1])
	ms, _ := strconv.Atoi(args[2])
	// struct sockaddr_in for 127.0.0.1:3128, built before the fork (the children run no Go code).
	sa := [16]byte{unix.AF_INET, 0, 3128 >> 8, 3128 & 0xff, 127, 0, 0, 1}
	forked := 0
	for ; forked < k; forked++ {
		pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if errno != 0 {
			break
		}
		if pid == 0 {
			for range n {
				fd, _, errno := unix.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0)
				if errno != 0 {
					break
				}
				unix.RawSyscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(&sa[0])), uintptr(len(sa)))
			}
			for {
				unix.RawSyscall6(unix.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
			}
		}
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return report{Result: "allowed", Step: "connect", Detail: fmt.Sprintf("%d children connecting", forked)}
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
