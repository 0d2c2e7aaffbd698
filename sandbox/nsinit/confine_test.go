package nsinit

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// threadStatus returns the fields of /proc/self/task/TID/status.
func threadStatus(tid int) (map[string]string, error) {
	return statusFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
}

// statusFile returns the fields of a /proc status file (path), each value trimmed; an empty map
// and the error when it cannot be read.
func statusFile(path string) (map[string]string, error) {
	out := map[string]string{}
	data, err := os.ReadFile(path)
	if err != nil {
		return out, err
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, nil
}

// otherThread returns a thread of this process other than the calling one that runs as root with
// a full bounding set (not one a previous run of the test confined, which may not have exited yet).
func otherThread() (int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == unix.Gettid() {
			continue
		}
		if st, err := threadStatus(tid); err == nil && st["Uid"] == "0\t0\t0\t0" && st["CapBnd"] != noCapabilities {
			return tid, nil
		}
	}
	return 0, errors.New("no other unconfined thread")
}

// TestThreadCredentials: setThreadCredentials and dropBoundingSet change the calling thread and no
// other (the init confines the thread it forks the program from, and only it), and
// dropBoundingSet empties the whole bounding set without reading cap_last_cap. The thread is
// thrown away afterwards: its goroutine ends locked to it.
func TestThreadCredentials(t *testing.T) {
	fixture.NeedRoot(t)
	type result struct {
		self, other map[string]string
		err         error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		var r result
		defer func() { done <- r }()
		other, err := otherThread()
		if r.err = err; err != nil {
			return
		}
		if r.err = dropBoundingSet(); r.err != nil {
			return
		}
		if r.err = setThreadCredentials(65534, 65533, []int{100, 65533}); r.err != nil {
			return
		}
		if r.self, r.err = threadStatus(unix.Gettid()); r.err != nil {
			return
		}
		r.other, r.err = threadStatus(other)
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := map[string]string{
		"Uid": "65534\t65534\t65534\t65534", "Gid": "65533\t65533\t65533\t65533", "Groups": "100 65533",
		"CapBnd": noCapabilities,
	}
	for k, v := range want {
		if r.self[k] != v {
			t.Errorf("the calling thread's %s is %q, want %q", k, r.self[k], v)
		}
	}
	if r.other["Uid"] != "0\t0\t0\t0" || r.other["CapBnd"] == noCapabilities {
		t.Errorf("another thread changed too: Uid %q, CapBnd %q", r.other["Uid"], r.other["CapBnd"])
	}
}

// TestCheckBoundingSetEmpty: the check a zygote thread makes once it dropped its bounding set,
// ahead of its call (the call's own check no longer reads the set), fails on a thread that still
// has a capability there, even one far from the first, and passes once the set is empty. The
// thread is thrown away afterwards.
func TestCheckBoundingSetEmpty(t *testing.T) {
	fixture.NeedRoot(t)
	done := make(chan [3]error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		var errs [3]error
		defer func() { done <- errs }()
		errs[0] = checkBoundingSetEmpty()
		for c := uintptr(0); c < maxCapabilities; c++ { // all but CAP_SYS_ADMIN (21)
			if c == unix.CAP_SYS_ADMIN {
				continue
			}
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
				break
			}
		}
		errs[1] = checkBoundingSetEmpty()
		if errs[2] = dropBoundingSet(); errs[2] == nil {
			errs[2] = checkBoundingSetEmpty()
		}
	}()
	errs := <-done
	for i, want := range []string{"capability 0 is in the bounding set", "capability 21 is in the bounding set"} {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), want) {
			t.Fatalf("check %d: %v, want %q", i, errs[i], want)
		}
	}
	if errs[2] != nil {
		t.Fatalf("an emptied bounding set failed the check: %v", errs[2])
	}
}

// TestReadThreadStatus: verify's raw read gets the whole of /proc/thread-self/status, as
// os.ReadFile does (the fields that do not change between the two reads compared).
func TestReadThreadStatus(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	data, err := readThreadStatus()
	if err != nil {
		t.Fatal(err)
	}
	got, err := threadStatus(unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	if len(fields) != len(got) {
		t.Errorf("read %d fields, os.ReadFile %d", len(fields), len(got))
	}
	for _, k := range []string{"Name", "Pid", "Uid", "Gid", "Groups", "CapBnd", "NoNewPrivs", "Seccomp"} {
		if fields[k] != got[k] {
			t.Errorf("%s: %q, want %q", k, fields[k], got[k])
		}
	}
}
