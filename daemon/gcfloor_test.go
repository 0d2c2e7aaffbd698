package daemon

import (
	"os"
	"os/exec"
	"runtime"
	rtmetrics "runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 64 * mib, maxGCPercent},
		{1 * mib, 64 * mib, maxGCPercent}, // 6300 % would reach the floor: bounded
		{4 * mib, 64 * mib, 1500},
		{16 * mib, 64 * mib, 300},
		{32 * mib, 64 * mib, 100},
		{40 * mib, 64 * mib, 100}, // 60 % would reach it: never below Go's default
		{64 * mib, 64 * mib, 100},
		{500 * mib, 64 * mib, 100},
	} {
		if got := gcPercentFor(c.live, c.floor); got != c.want {
			t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
	}
}

// gogc is the collector's current target.
func gogc() int {
	s := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestKeepHeapFloor: without GOGC the target follows the live heap after each collection (raised
// while the heap is small, back to 100 once it holds more than the floor); with GOGC set it is
// left alone. It runs in a child process: the collector's setting is the whole process's.
func TestKeepHeapFloor(t *testing.T) {
	if os.Getenv("CLIHOST_TEST_GCFLOOR") == "" {
		runChild(t, "TestKeepHeapFloor", "CLIHOST_TEST_GCFLOOR=1")
		runChild(t, "TestKeepHeapFloor", "CLIHOST_TEST_GCFLOOR=1", "GOGC=100")
		return
	}
	if _, set := os.LookupEnv("GOGC"); set {
		if KeepHeapFloor() || gogc() != 100 {
			t.Fatalf("GOGC=100 was not kept: %d", gogc())
		}
		return
	}
	if !KeepHeapFloor() {
		t.Fatal("KeepHeapFloor did nothing without GOGC")
	}
	waitGOGC(t, func(p int) bool { return p > 100 }, "raised for a small heap")
	big := make([][]byte, 0, 96)
	for range 96 { // 96 MiB live, above HeapFloor
		big = append(big, make([]byte, 1<<20))
	}
	waitGOGC(t, func(p int) bool { return p == 100 }, "back to 100 for a heap above the floor")
	runtime.KeepAlive(big)
	big = nil
	waitGOGC(t, func(p int) bool { return p > 100 }, "raised again once the heap shrank")
}

// waitGOGC collects until the target satisfies ok (the cleanup that adjusts it runs after a
// collection, on its own goroutine).
func waitGOGC(t *testing.T, ok func(int) bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		if ok(gogc()) {
			return
		}
	}
	t.Fatalf("the GC target was not %s: %d", what, gogc())
}

// runChild runs the test binary's test name again in a child process with env added.
func runChild(t *testing.T, name string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", env, err, out)
	}
}
