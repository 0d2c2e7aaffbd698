//go:build amd64 && !race

package runner_test

// zygoteBuild says this test binary can run nsinit's zygote: its raw clones need amd64 and no race
// detector (sandbox/nsinit/raw_other.go).
const zygoteBuild = true
