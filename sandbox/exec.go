package sandbox

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/clihost/clihost/manifest"
)

// maxInterpreterDepth is how many interpreters may stand between a file and the ELF program that
// finally runs it; Linux allows the same (BINPRM_MAX_RECURSION).
const maxInterpreterDepth = 4

// shebangMax is how much of a script's first line the kernel reads (BINPRM_BUF_SIZE).
const shebangMax = 256

// execs resolves the binary and records everything that may be executed: the binary and its
// interpreters always; when exec.allow is true, the exec.spawn entries and their interpreters.
//
// A spawn entry is a bare name, looked up on Input.PATH, or an absolute path. An absolute path
// that does not resolve to a regular file is an error (the manifest named a file that is not
// there: fail closed). A bare name not found on PATH is dropped with a note: the CLI then cannot
// run it, which fails closed by itself, and a host without an optional tool (say git for gh) can
// still run the rest. exec.allow true with no spawn list lets nothing else run.
func (c *compiler) execs(binary string, e *manifest.Exec) (string, error) {
	if !filepath.IsAbs(binary) {
		return "", fmt.Errorf("binary %q is not an absolute path", binary)
	}
	bin, err := c.executable(binary)
	if err != nil {
		return "", fmt.Errorf("binary: %w", err)
	}
	if err := c.addExecutable(bin, 0); err != nil {
		return "", err
	}
	if !e.Allowed() {
		if e != nil && len(e.Spawn) > 0 {
			c.note("exec.spawn is ignored: exec.allow is false")
		}
		return bin, nil
	}
	if len(e.Spawn) == 0 {
		c.note("exec.allow is true but exec.spawn lists nothing: only the binary and its interpreters may run")
	}
	for i, s := range e.Spawn {
		var p string
		switch {
		case filepath.IsAbs(s):
			if p, err = c.executable(s); err != nil {
				return "", fmt.Errorf("exec.spawn[%d]: %w", i, err)
			}
		case s == "":
			return "", fmt.Errorf("exec.spawn[%d] is empty: a spawn entry is a bare name, an absolute path or a path inside the binary's node_modules", i)
		case strings.Contains(s, "/"):
			if p, err = c.inPackageTree(bin, s); err != nil {
				return "", fmt.Errorf("exec.spawn[%d] %q: %w", i, s, err)
			}
			if p == "" {
				c.note("exec.spawn %q: not found in the binary's node_modules tree; it may not be run", s)
				continue
			}
		default:
			if p = c.lookPath(s, c.in.PATH); p == "" {
				c.note("exec.spawn %q: not found on PATH; it may not be run", s)
				continue
			}
		}
		if err := c.addExecutable(p, 0); err != nil {
			return "", fmt.Errorf("exec.spawn[%d] %q: %w", i, s, err)
		}
	}
	return bin, nil
}

// packageTree is the npm package tree a resolved binary lies in: its outermost node_modules
// ancestor (npm and pnpm hoist a package's dependencies up to it), or "" when it has none.
func packageTree(bin string) string {
	parts := strings.Split(bin, "/")
	for i, p := range parts[:len(parts)-1] {
		if p == "node_modules" && i > 0 {
			return strings.Join(parts[:i+1], "/")
		}
	}
	return ""
}

// inPackageTree resolves a relative spawn entry inside bin's package tree (an npm launcher's
// platform binary, such as codex's @openai/codex-linux-x64/vendor/…/codex): "" when bin has no
// tree (installed otherwise) or the file does not exist there (the launcher then cannot run it,
// which fails closed); an error when the entry is not clean or its symlinks lead out of the tree.
func (c *compiler) inPackageTree(bin, rel string) (string, error) {
	if filepath.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("a path inside the package tree must be clean and may not climb out of it")
	}
	tree := packageTree(bin)
	if tree == "" {
		return "", nil
	}
	p, err := c.executable(filepath.Join(tree, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !within(p, tree) {
		return "", fmt.Errorf("%s resolves outside the package tree %s", p, tree)
	}
	return p, nil
}

// executable resolves p's symlinks and checks that it is a regular file.
func (c *compiler) executable(p string) (string, error) {
	r, err := c.fs.evalSymlinks(p)
	if err != nil {
		return "", err
	}
	st, err := c.fs.lstat(r)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", r)
	}
	return r, nil
}

// lookPath finds name in the absolute directories of pathList, returning the first executable
// regular file with its symlinks resolved, or "".
func (c *compiler) lookPath(name, pathList string) string {
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			continue // "" and relative entries mean the working directory: never searched
		}
		p, err := c.executable(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if st, err := c.fs.lstat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// addExecutable records a resolved executable and, recursively, what it needs to start: the ELF
// interpreter of a dynamic executable, or the interpreter of a #! script (and, for
// `#!/usr/bin/env prog`, prog found on PATH).
func (c *compiler) addExecutable(p string, depth int) error {
	c.exec[p] = true
	interp, arg, script, err := c.interpreterOf(p)
	if err != nil || interp == "" {
		return err
	}
	if depth >= maxInterpreterDepth {
		return fmt.Errorf("%s: more than %d nested interpreters", p, maxInterpreterDepth)
	}
	if !filepath.IsAbs(interp) {
		return fmt.Errorf("%s: interpreter %q is not an absolute path", p, interp)
	}
	r, err := c.executable(interp)
	if err != nil {
		return fmt.Errorf("%s: interpreter: %w", p, err)
	}
	if err := c.addExecutable(r, depth+1); err != nil {
		return err
	}
	if !script || filepath.Base(interp) != "env" {
		return nil
	}
	prog := envProgram(arg)
	switch {
	case prog == "":
		c.note("%s: #!%s %s names no program this compiler can find; only env may run", p, interp, arg)
		return nil
	case filepath.IsAbs(prog):
		r, err = c.executable(prog)
	default:
		if r = c.lookPath(prog, c.in.PATH); r == "" {
			err = errors.New("not found on PATH")
		}
	}
	if err != nil {
		c.note("%s: #!%s program %q: %v; it may not be run", p, interp, prog, err)
		return nil
	}
	return c.addExecutable(r, depth+1)
}

// interpreterOf returns the interpreter the kernel runs p with: PT_INTERP of an ELF file, or the
// #! line's interpreter and its (single) argument for a script. A static ELF or any other file
// has none. reads are the reads it made of p (see recordingReader).
func interpreterOf(p string) (interp, arg string, script bool, reads []fileRead, err error) {
	f, err := openPaged(p)
	if err != nil {
		return "", "", false, nil, err
	}
	defer f.Close()
	r := &recordingReader{r: f}
	interp, arg, script, err = interpreterFrom(p, r)
	if err == nil && r.failed {
		err = fmt.Errorf("read %s: a read failed", p)
	}
	return interp, arg, script, r.reads, err
}

// interpreterFrom is interpreterOf of the file p read through r.
func interpreterFrom(p string, r io.ReaderAt) (interp, arg string, script bool, err error) {
	head := make([]byte, shebangMax)
	n, err := r.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", "", false, fmt.Errorf("read %s: %w", p, err)
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte(elf.ELFMAG)):
		interp, err = elfInterpreter(r)
		if err != nil {
			return "", "", false, fmt.Errorf("%s: %w", p, err)
		}
		return interp, "", false, nil
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		fields := strings.TrimSpace(string(line))
		interp, arg, _ = strings.Cut(strings.ReplaceAll(fields, "\t", " "), " ")
		if interp == "" {
			return "", "", false, fmt.Errorf("%s: #! line names no interpreter", p)
		}
		return interp, strings.TrimSpace(arg), true, nil
	}
	return "", "", false, nil
}

// elfInterpreter reads PT_INTERP; "" for a static executable.
func elfInterpreter(r io.ReaderAt) (string, error) {
	ef, err := elf.NewFile(r)
	if err != nil {
		return "", fmt.Errorf("parse ELF: %w", err)
	}
	for _, prog := range ef.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(prog.Open())
		if err != nil {
			return "", fmt.Errorf("read PT_INTERP: %w", err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// envProgram returns the program `#!/usr/bin/env ARG` runs. The kernel passes ARG as one word, so
// without -S it is the program itself; with -S (--split-string) env splits it and skips its
// options (-u NAME, -C DIR take a value) and NAME=VALUE assignments. "" when there is none.
func envProgram(arg string) string {
	var words []string
	switch {
	case strings.HasPrefix(arg, "-S"):
		words = strings.Fields(arg[2:])
	case strings.HasPrefix(arg, "--split-string="):
		words = strings.Fields(strings.TrimPrefix(arg, "--split-string="))
	case arg == "" || strings.HasPrefix(arg, "-") || strings.ContainsAny(arg, " \t"):
		return ""
	default:
		return arg
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-u" || w == "-C" || w == "--unset" || w == "--chdir":
			i++
		case strings.HasPrefix(w, "-") || strings.Contains(w, "="):
		default:
			return w
		}
	}
	return ""
}
