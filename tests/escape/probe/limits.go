package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The resource-limit attempts. Unlike the escape attempts they behave like a CLI that runs out of
// something: when they hit a limit they print their report to stderr as well and exit 1, so that
// the call fails and the host has to say why. Each has a cap so that a missing limit cannot take
// the test host down.
func init() {
	cases["forkbomb"] = forkBomb
	cases["membomb"] = memBomb
	cases["fill"] = fill(false)
	cases["fsize"] = fill(true)
	cases["fds"] = openFiles
	cases["cpuburn"] = cpuBurn
}

// failed prints r as the probe's output to stdout and stderr and exits 1.
func failed(r report) report {
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	fmt.Fprintln(os.Stderr, string(out))
	os.Exit(1)
	return r
}

// forkBomb forks (raw clone, no exec) children that block forever, until the kernel refuses one
// or 100000 are running.
func forkBomb([]string) report {
	for i := range 100000 {
		pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if errno != 0 {
			r := result("clone", errno)
			r.Detail = fmt.Sprintf("forked %d children: %v", i, errno)
			return failed(r)
		}
		if pid == 0 { // the child: no Go runtime calls, only a blocking syscall
			for {
				unix.RawSyscall6(unix.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
			}
		}
	}
	return report{Result: "allowed", Step: "clone", Detail: "forked 100000 children"}
}

// memBomb MIB allocates and touches memory 1 MiB at a time, up to MIB.
func memBomb(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	limit, err := strconv.Atoi(args[0])
	if err != nil {
		return result("probe", err)
	}
	var keep [][]byte
	for i := range limit {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = byte(i)
		}
		keep = append(keep, b)
	}
	return report{Result: "allowed", Step: "allocate", Detail: fmt.Sprintf("allocated %d MiB", len(keep))}
}

// fill returns the attempt "fill PATH MIB": write MIB files of 1 MiB each, PATH.0, PATH.1, …
// (so that the file size limit is not what stops it), or "fsize PATH MIB": write PATH 1 MiB at a
// time, up to MIB, with SIGXFSZ's default action restored first (the Go runtime ignores it), so
// that the kernel kills the probe at RLIMIT_FSIZE as it kills dd or cp.
func fill(oneFile bool) attempt {
	return func(args []string) report {
		if r := need(args, 2); r != nil {
			return *r
		}
		limit, err := strconv.Atoi(args[1])
		if err != nil {
			return result("probe", err)
		}
		if oneFile {
			if err := sigDefault(unix.SIGXFSZ); err != nil {
				return result("rt_sigaction", err)
			}
		}
		chunk := make([]byte, 1<<20)
		var f *os.File
		for i := range limit {
			if f == nil || !oneFile {
				name := args[0]
				if !oneFile {
					name += "." + strconv.Itoa(i)
				}
				if f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
					return failed(result("open", err))
				}
			}
			_, err := f.Write(chunk)
			if err == nil && !oneFile {
				err = f.Close()
			}
			if err != nil {
				r := result("write", err)
				r.Detail = fmt.Sprintf("wrote %d MiB: %v", i, err)
				return failed(r)
			}
		}
		return report{Result: "allowed", Step: "write", Detail: fmt.Sprintf("wrote %d MiB", limit)}
	}
}

// openFiles MAX opens /dev/null until the kernel refuses or MAX are open.
func openFiles(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	limit, err := strconv.Atoi(args[0])
	if err != nil {
		return result("probe", err)
	}
	for i := range limit {
		if _, err := unix.Open("/dev/null", unix.O_RDONLY, 0); err != nil {
			r := result("open", err)
			r.Detail = fmt.Sprintf("opened %d: %v", i, err)
			return r
		}
	}
	return report{Result: "allowed", Step: "open", Detail: fmt.Sprintf("opened %d", limit)}
}

// cpuBurn SECONDS spins for SECONDS of wall-clock time, with SIGXCPU's default action restored.
func cpuBurn(args []string) report {
	if r := need(args, 1); r != nil {
		return *r
	}
	secs, err := strconv.Atoi(args[0])
	if err != nil {
		return result("probe", err)
	}
	if err := sigDefault(unix.SIGXCPU); err != nil {
		return result("rt_sigaction", err)
	}
	end := time.Now().Add(time.Duration(secs) * time.Second)
	n := 0
	for time.Now().Before(end) {
		n++
	}
	return report{Result: "allowed", Step: "spin", Detail: fmt.Sprintf("spun %d s", secs)}
}

// sigDefault sets sig's action to SIG_DFL with rt_sigaction (os/signal cannot undo the runtime's
// own handler). An all-zero struct sigaction is SIG_DFL with no flags on every architecture.
func sigDefault(sig unix.Signal) error {
	var act [4]uint64
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	return errnoErr(errno)
}
