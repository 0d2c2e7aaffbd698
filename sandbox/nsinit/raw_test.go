package nsinit

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// runRaw runs prog in a raw child of the calling thread, waits for its end and returns its
// exit status and its failure (nil when every op passed: the child then exits with 126).
func runRaw(t *testing.T, prog *rawProgram) (int, error) {
	t.Helper()
	if !rawCloneSupported {
		fixture.Missing(t, "raw clones (amd64 without the race detector)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, w, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(r)
	pid, pidfd, err := prog.start(true, -1, w)
	unix.Close(w)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.release()
	unix.Close(pidfd)
	status := waitProgram(pid)
	var buf [16]byte
	if n, _ := readFull(r, buf[:]); n == len(buf) {
		return status, prog.failure(buf[:])
	}
	return status, nil
}

// TestRawChildChecksWhatItsCallsReturnAndWrite: an op that must return a value (expect) or leave
// bytes in memory it writes (expectOut) fails the child, named, when it does not; the program's
// process relies on both to check the identity it took (dropIdentity).
func TestRawChildChecksWhatItsCallsReturnAndWrite(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	for _, tc := range []struct {
		name    string
		uid     int // what getuid must return
		resuid  int // what getresuid must write, thrice
		failing string
	}{
		{"right", uid, uid, ""},
		{"wrong result", uid + 1, uid, "verify: uid"},
		{"wrong memory", uid, uid + 1, "verify: resuid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog := &rawProgram{}
			prog.call("verify: uid", unix.SYS_GETUID).expect(uintptr(tc.uid))
			res, at := prog.buf(12)
			prog.call("verify: resuid", unix.SYS_GETRESUID, at, at+4, at+8).expectOut(res, idBytes(tc.resuid, tc.resuid, tc.resuid))
			prog.call("verify: gid", unix.SYS_GETGID).expect(uintptr(gid))
			status, err := runRaw(t, prog)
			var f *rawFailure
			switch {
			case tc.failing == "" && (err != nil || status != 126):
				t.Fatalf("the child failed (%v) or did not run every op (exit %d)", err, status)
			case tc.failing == "":
			case !errors.As(err, &f) || f.Op != tc.failing || !errors.Is(err, errUnexpected) || status != 127:
				t.Fatalf("want %q to fail with an unexpected result (exit 127), got %v (exit %d)", tc.failing, err, status)
			}
		})
	}
}
