package access

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// processWide matches the calls that change every thread's credentials (Go's syscall setters,
// and x/sys/unix's, reach all threads): a check's thread would take back, after the check, what
// it had before such a change (see onThreadAs).
var processWide = regexp.MustCompile(`\b(syscall|unix)\.(Setuid|Setgid|Setreuid|Setregid|Setresuid|Setresgid|Setgroups|AllThreadsSyscall6?)\(`)

// TestNoProcessWideCredentialChange: no code of the module (tests aside) changes the process's
// credentials with a call that reaches every thread. The sandbox's own processes set theirs with
// raw per-thread system calls (sandbox/nsinit).
func TestNoProcessWideCredentialChange(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root: %v", err)
	}
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if processWide.MatchString(line) {
				t.Errorf("%s:%d: %s", p, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil || files < 100 {
		t.Fatalf("walked %d Go files: %v", files, err)
	}
}
