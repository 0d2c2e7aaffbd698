//go:build !amd64 || race

package runner_test

// zygoteBuild says this test binary can run nsinit's zygote: not on this architecture, nor with
// the race detector (sandbox/nsinit/raw_other.go). The same tests run without -race.
const zygoteBuild = false
