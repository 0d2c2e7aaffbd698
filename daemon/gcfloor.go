package daemon

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
)

// The daemon's live heap is small (a few MiB without a large catalog), while every MCP request
// leaves about 320 KiB of garbage, nearly all of it the go-sdk's JSON decoding (a 32 KiB buffer
// for each document it decodes, about ten a request). At Go's default target (GOGC=100, the heap
// may double what is live) the collector ran every dozen calls and took about a third of the
// daemon's own CPU a call. A heap floor fixes that without the memory of a larger ratio: after
// every collection the target is raised so that the heap may grow to HeapFloor before the next,
// within [100, maxGCPercent]; a heap that is live above HeapFloor keeps the default ratio.
const (
	// HeapFloor is the heap size below which the daemon's collector does not start a cycle
	// (unless GOGC or GOMEMLIMIT say otherwise).
	HeapFloor = 32 << 20
	// maxGCPercent bounds the raised target (a heap almost empty after start).
	maxGCPercent = 1600
)

// gcPercentFor is the GC target (GOGC) that lets a heap with live bytes live grow to floor before
// the next collection: at least 100, at most maxGCPercent.
func gcPercentFor(live, floor uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	if live >= floor {
		return 100
	}
	return min(max(int((floor-live)*100/live), 100), maxGCPercent)
}

// KeepHeapFloor makes this process's collector keep the heap floor (HeapFloor) from now on,
// unless the environment sets GOGC (the operator's target is kept). It reports whether it did.
func KeepHeapFloor() bool {
	if _, set := os.LookupEnv("GOGC"); set {
		return false
	}
	keepFloor(HeapFloor)
	return true
}

// keepFloor sets the target for floor now and again after every collection, from the live heap
// that collection found.
func keepFloor(floor uint64) {
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := -1
	var adjust func()
	adjust = func() {
		rtmetrics.Read(sample)
		if p := gcPercentFor(sample[0].Value.Uint64(), floor); p != current {
			debug.SetGCPercent(p)
			current = p
		}
		arm(adjust)
	}
	adjust()
}

// sentinel is an object made only to be collected: its cleanup tells that a collection ran. It
// holds a pointer so that it is not batched with other tiny objects (which would delay it).
type sentinel struct{ _ *int }

// arm runs f (in the runtime's cleanup goroutine) after the next collection.
func arm(f func()) {
	runtime.AddCleanup(new(sentinel), func(f func()) { f() }, f)
}
