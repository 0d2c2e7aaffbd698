package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }
func (l *list) List() []string     { return *l }

type flags struct {
	fs      *flag.FlagSet
	http    string
	keep    int
	drain   time.Duration
	off     bool
	bundles list
}

func newFlags(args ...string) (*flags, *Section) {
	f := &flags{fs: flag.NewFlagSet("t", flag.ContinueOnError)}
	f.fs.StringVar(&f.http, "http", "127.0.0.1:8931", "listener")
	f.fs.IntVar(&f.keep, "audit-keep", 5, "kept logs")
	f.fs.DurationVar(&f.drain, "drain-timeout", 10*time.Second, "drain")
	f.fs.BoolVar(&f.off, "no-catalog", false, "no catalog")
	f.fs.Var(&f.bundles, "bundles", "a bundle directory (repeatable)")
	f.fs.Bool("check", false, "check and exit")
	if err := f.fs.Parse(args); err != nil {
		panic(err)
	}
	s := FromFlagSet(f.fs, "check")
	s.MarkChanged(f.fs)
	return f, s
}

// TestApply: every flag has its key; the command line wins; lists take sequences.
func TestApply(t *testing.T) {
	f, s := newFlags("--audit-keep", "9")
	err := Apply("c.yaml", []byte("http: 127.0.0.1:9000\naudit-keep: 2\ndrain-timeout: 3s\nno-catalog: true\nbundles: [/a, /b]\n"), s)
	if err != nil {
		t.Fatal(err)
	}
	if f.http != "127.0.0.1:9000" || f.keep != 9 || f.drain != 3*time.Second || !f.off || strings.Join(f.bundles, " ") != "/a /b" {
		t.Fatalf("applied: %+v", f)
	}
	f, s = newFlags("--bundles", "/cli")
	if err := Apply("c.yaml", []byte("bundles: /a\n"), s); err != nil || strings.Join(f.bundles, " ") != "/cli" {
		t.Fatalf("a list given on the command line replaces the file's: %v %v", f.bundles, err)
	}
	for _, empty := range []string{"", "# only a comment\n", "---\n"} {
		if err := Apply("c.yaml", []byte(empty), s); err != nil {
			t.Errorf("%q: %v", empty, err)
		}
	}
}

// TestApplyMistakes: an unknown key names the nearest one with its position; nothing is set from
// a file with a wrong key; command-line-only flags have no key.
func TestApplyMistakes(t *testing.T) {
	for doc, want := range map[string]string{
		"http: x\nadit-keep: 3\n":    `c.yaml:2:1: unknown key "adit-keep"; did you mean "audit-keep"?`,
		"htpp: x\n":                  `did you mean "http"?`,
		"zzzzzzzzzz: 1\n":            `unknown key "zzzzzzzzzz"; the keys are the flag names: audit-keep, bundles`,
		"check: true\n":              `unknown key "check"`,
		"http: [a, b]\n":             "takes one value, not a list",
		"http: {a: b}\n":             "want a plain value",
		"http: a\nhttp: b\n":         "appears twice",
		"audit-keep: many\n":         `c.yaml:1:1: audit-keep "many": parse error`,
		"- a\n":                      "want a mapping",
		"bundles: [[a]]\n":           "want a plain value",
		"http: 127.0.0.1:1\nhtpp: x": "htpp",
	} {
		f, s := newFlags()
		err := Apply("c.yaml", []byte(doc), s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
		if doc == "http: 127.0.0.1:1\nhtpp: x" && f.http != "127.0.0.1:8931" {
			t.Errorf("a file with a mistake set http to %q", f.http)
		}
	}
}

// TestPrintReadsBack: Print's output is a file that Apply reads back to the same values.
func TestPrintReadsBack(t *testing.T) {
	_, s := newFlags("--http", "[::1]:0", "--bundles", "/a b", "--bundles", "#c", "--drain-timeout", "1m")
	var buf bytes.Buffer
	if err := Print(&buf, s); err != nil {
		t.Fatal(err)
	}
	g, s2 := newFlags()
	if err := Apply("printed", buf.Bytes(), s2); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if g.http != "[::1]:0" || strings.Join(g.bundles, "|") != "/a b|#c" || g.drain != time.Minute || g.keep != 5 {
		t.Fatalf("read back %+v from\n%s", g, buf.String())
	}
	if !strings.Contains(buf.String(), "# listener\nhttp:") {
		t.Errorf("no usage comments:\n%s", buf.String())
	}
}

// TestReadFileTrust: a file or folder others may write is refused (a sticky folder is not); a
// missing default file is none, a missing named one an error.
func TestReadFileTrust(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte("http: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(p, true); err != nil || string(data) != "http: x\n" {
		t.Fatalf("a private file: %q %v", data, err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, true); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a world-writable file: %v", err)
	}
	_ = os.Chmod(p, 0o644)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, true); err == nil || !strings.Contains(err.Error(), "the folder "+dir) {
		t.Errorf("a file in a world-writable folder: %v", err)
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, true); err != nil {
		t.Errorf("a file in a sticky folder: %v", err)
	}
	_ = os.Chmod(dir, 0o700)
	link := filepath.Join(t.TempDir(), "link.yaml")
	open := t.TempDir()
	_ = os.Chmod(open, 0o777)
	target := filepath.Join(open, "c.yaml")
	_ = os.WriteFile(target, []byte("http: y\n"), 0o600)
	_ = os.Symlink(target, link)
	if _, err := ReadFile(link, true); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a symlink into a world-writable folder: %v", err)
	}
	if data, err := ReadFile(filepath.Join(dir, "none.yaml"), false); data != nil || err != nil {
		t.Errorf("a missing default file: %q %v", data, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "none.yaml"), true); err == nil {
		t.Error("a missing named file: no error")
	}
	if _, err := ReadFile(dir, true); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a folder: %v", err)
	}
}

// TestReadFileSpecial: a FIFO, a device or a folder named as the configuration file is refused
// at once; opening a FIFO for reading must not wait for a writer (a hung daemon or clihostctl).
func TestReadFileSpecial(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "clihostd.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero", t.TempDir()} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(path, true); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("ReadFile(%s) = %v, want not a regular file", path, err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("ReadFile(%s) still blocked after 3s", path)
		}
	}
}

// TestReadFileLinkChain: a folder holding a symlink in the middle of the file's chain of links
// (neither on the path as named nor as resolved) is checked too: whoever may write it could
// point the link at another file (another root-owned configuration, with the sandbox off).
func TestReadFileLinkChain(t *testing.T) {
	named, open, real := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(real, "c.yaml")
	if err := os.WriteFile(target, []byte("http: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hop := filepath.Join(open, "hop")
	link := filepath.Join(named, "clihostd.yaml")
	if err := os.Symlink(target, hop); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hop, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(link, true); err == nil || !strings.Contains(err.Error(), "the folder "+open) {
		t.Errorf("a link chain through a world-writable folder: %v", err)
	}
	// The same chain through a folder link (named/etc -> open/d -> real) and a relative link.
	if err := os.Symlink(real, filepath.Join(open, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", filepath.Base(open), "d"), filepath.Join(named, "etc")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(filepath.Join(named, "etc", "c.yaml"), true); err == nil || !strings.Contains(err.Error(), "the folder "+open) {
		t.Errorf("a folder link in a world-writable folder: %v", err)
	}
	// Once that folder is private, both chains are read.
	if err := os.Chmod(open, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, filepath.Join(named, "etc", "c.yaml")} {
		if data, err := ReadFile(p, true); err != nil || string(data) != "http: x\n" {
			t.Errorf("%s: %q %v", p, data, err)
		}
	}
}
