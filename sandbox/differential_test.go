package sandbox

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"testing"
)

// fuzzSeeds runs fuzz for seeds 0, 1, …: def of them, or as many as the variable env names (a
// longer run). Each returns how many times a kept policy was used right after a change; the test
// fails when that never happened (it would prove nothing).
func fuzzSeeds(t *testing.T, env string, def uint64, fuzz func(t *testing.T, seed uint64) int) {
	t.Helper()
	seeds := def
	if n, err := strconv.ParseUint(os.Getenv(env), 10, 64); err == nil {
		seeds = n
	}
	total := 0
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { total += fuzz(t, seed) })
		if t.Failed() {
			break
		}
	}
	t.Logf("a kept policy was used right after %d changes in all", total)
	if total == 0 {
		t.Error("no kept policy was used after a change: the test proves nothing")
	}
}

// compareThree compiles in through c, afresh, and afresh reading every folder (no kept listing),
// and stops the test when any two disagree; where says which step and call it is. It returns the
// fresh policy and error, and whether c used a kept policy.
func compareThree(t *testing.T, c *Cache, in Input, where string) (*Policy, error, bool) {
	t.Helper()
	before := c.Reused()
	got, gotErr := c.Compile(in)
	reused := c.Reused() > before
	want, wantErr := Compile(in)
	var read *Policy
	var readErr error
	freshListings(func() { read, readErr = Compile(in) })
	if !sameError(gotErr, wantErr) {
		t.Fatalf("%s: the cache says %v, a compilation %v", where, gotErr, wantErr)
	}
	if !sameError(readErr, wantErr) {
		t.Fatalf("%s: with kept listings %v, reading every folder %v", where, wantErr, readErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: the cache's policy (reused %v) differs: %s", where, reused, policyDiff(got, want))
	}
	if !reflect.DeepEqual(read, want) {
		t.Fatalf("%s: kept listings vs reading every folder: %s", where, policyDiff(want, read))
	}
	return want, wantErr, reused
}

// sameError reports whether a and b are both nil or say the same.
func sameError(a, b error) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
}
