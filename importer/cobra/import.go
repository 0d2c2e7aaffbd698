// Package cobra imports a Cobra command-line program as a clihost bundle, from outside: it runs the
// binary's hidden __complete command and its --help, and never needs the program's source.
//
// The walk follows bridges.md §4.4: detect Cobra with "BIN __complete -" (the output ends with a
// ":N" directive line); list subcommands with "BIN PATH __complete \"\"" and keep those the help's
// command sections also list (so hidden and deprecated commands, aliases and ValidArgs are left
// out); find required flags with "BIN __complete PATH -" (while a required flag is unset, Cobra
// lists only the required ones), list all flags again with the required ones given; read types and
// defaults from "BIN PATH --help" (Cobra's, gh's and kubectl's layouts, backquoted value names);
// and read positionals from the usage line. Every probe runs without a shell, with TERM=dumb,
// NO_COLOR=1, PAGER=cat, an empty HOME and working directory, stdin at end of file and a timeout.
package cobra

import (
	"github.com/clihost/clihost/importer/cobra/usage"

	"bufio"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
)

// Options configure an import.
type Options struct {
	Bin      string        // the program: a name on PATH or a path
	ID       string        // the bundle id; default: the binary's base name
	BinName  string        // bin as written in CLI.md; default: Bin as given when it has no '/', else its absolute path
	Timeout  time.Duration // per probe; default 10s
	Parallel int           // probes at once; default 4
	// Sandbox choices for the bundle (default: workspace read-only, no network, no other programs).
	Egress         []string          // hosts the CLI may reach
	WriteWorkspace bool              // the CLI may write the workspace
	Read           []string          // more fs.read patterns, such as the CLI's own config (~/.config/gh/**)
	Write          []string          // more fs.write patterns
	Spawn          []string          // other programs the CLI may start
	EnvPass        []string          // host variables passed to the CLI (clihost always sets HOME)
	EnvSet         map[string]string // variables set for the CLI (sandbox.env.set); not for secrets: they are written into CLI.md
	Install        []Install
	Logf           func(format string, args ...any) // progress; nil: quiet
}

// Install is one install entry of the bundle (CLI.md install).
type Install struct {
	Method, Package string
}

// Bundle is an imported CLI, ready to Write.
type Bundle struct {
	ID, Name, Description string
	Bin                   string // as written in CLI.md
	Path                  string // the resolved binary
	Root                  string // the program's own name (the first word of its usage lines)
	Version               string
	VersionCmd            string
	VersionParse          string
	Install               []Install
	JSONFlag              string
	JSONFlagArgs          []string
	Tools                 []*Tool
	Notes                 []string // what was skipped and why
	opts                  Options
}

// Tool is one runnable command.
type Tool struct {
	Path        []string
	Short       string
	Description string
	Usage       string
	Flags       []*Flag
	Args        []usage.Arg
	JSON        bool   // the tool asks for JSON with the bundle's JSON flag
	jsonKey     string // the JSON flag this command has ("--json", "--output json", …)
}

// ErrNotCobra is returned when the program does not answer __complete like a Cobra program.
var ErrNotCobra = errors.New("not a Cobra program: BIN __complete - printed no completion directive")

type prober struct {
	path    string
	env     []string
	dir     string
	home    string
	timeout time.Duration
	sem     chan struct{}
}

func (p *prober) run(ctx context.Context, args ...string) (string, string, error) {
	out, errOut, _, err := p.runExit(ctx, args...)
	return out, errOut, err
}

// runExit runs BIN ARGS... and returns its output (with the temporary HOME written as ~) and exit code.
func (p *prober) runExit(ctx context.Context, args ...string) (string, string, int, error) {
	p.sem <- struct{}{}
	defer func() { <-p.sem }()
	res, err := runner.Run(ctx, runner.Command{Path: p.path, Args: args, Dir: p.dir, Env: p.env, Stdin: []byte{},
		Timeout: p.timeout, StdoutLimit: 4 << 20, StderrLimit: 1 << 20})
	if err != nil {
		return "", "", -1, err
	}
	if res.TimedOut {
		return "", "", -1, fmt.Errorf("%s %s did not finish within %s", filepath.Base(p.path), strings.Join(args, " "), p.timeout)
	}
	return strings.ReplaceAll(string(res.Stdout), p.home, "~"), strings.ReplaceAll(string(res.Stderr), p.home, "~"), res.ExitCode, nil
}

// completion is one line of __complete output.
type completion struct{ value, desc string }

var directiveLine = regexp.MustCompile(`^:[0-9]+$`)

// complete runs BIN __complete ARGS... and returns its entries, or ok false without a directive line.
func (p *prober) complete(ctx context.Context, args ...string) ([]completion, bool) {
	out, _, err := p.run(ctx, append([]string{"__complete"}, args...)...)
	if err != nil {
		return nil, false
	}
	var list []completion
	ok := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if directiveLine.MatchString(line) {
			ok = true
			continue
		}
		if line == "" {
			continue
		}
		v, d, _ := strings.Cut(line, "\t")
		list = append(list, completion{v, d})
	}
	return list, ok
}

// help runs BIN PATH... --help.
func (p *prober) help(ctx context.Context, path []string) (*Help, error) {
	out, errOut, err := p.run(ctx, append(append([]string(nil), path...), "--help")...)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(out) == "" {
		out = errOut
	}
	return ParseHelp(out), nil
}

// Import probes the program and builds the bundle.
func Import(ctx context.Context, o Options) (*Bundle, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	path, err := exec.LookPath(o.Bin)
	if err != nil {
		return nil, err
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	b := &Bundle{Path: path, opts: o}
	b.Bin = o.BinName
	if b.Bin == "" {
		b.Bin = o.Bin
		if strings.Contains(o.Bin, "/") {
			b.Bin = path
		}
	}
	b.ID = o.ID
	if b.ID == "" {
		b.ID = BundleID(filepath.Base(path))
	}
	work, err := os.MkdirTemp("", "clihost-import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	dir, home := filepath.Join(work, "cwd"), filepath.Join(work, "home")
	for _, d := range []string{dir, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	p := &prober{path: path, dir: dir, home: home, timeout: o.Timeout, sem: make(chan struct{}, o.Parallel),
		env: []string{"TERM=dumb", "NO_COLOR=1", "PAGER=cat", "GH_PAGER=cat", "GIT_PAGER=cat", "HOME=" + home, "LANG=C",
			"GH_NO_UPDATE_NOTIFIER=1", "GH_PROMPT_DISABLED=1", "PATH=" + os.Getenv("PATH")}}
	if _, ok := p.complete(ctx, "-"); !ok {
		return nil, fmt.Errorf("%s: %w", o.Bin, ErrNotCobra)
	}
	rootHelp, err := p.help(ctx, nil)
	if err != nil {
		return nil, err
	}
	b.Root = filepath.Base(path)
	for _, u := range rootHelp.Usage {
		if f := strings.Fields(u); len(f) > 0 {
			b.Root = f[0]
			break
		}
	}
	b.Description = firstParagraph(rootHelp.Description)
	b.Name = b.Root
	if err := b.findVersion(ctx, p); err != nil {
		return nil, err
	}
	b.Install = o.Install
	if len(b.Install) == 0 {
		b.Install = guessInstall(path, filepath.Base(path))
	}
	w := &walker{p: p, b: b, globals: map[string]*Flag{}}
	for n, f := range rootHelp.Flags {
		w.globals[n] = f
	}
	w.root(ctx, rootHelp)
	w.wg.Wait()
	if w.err != nil {
		return nil, w.err
	}
	sort.Slice(b.Tools, func(i, j int) bool { return strings.Join(b.Tools[i].Path, " ") < strings.Join(b.Tools[j].Path, " ") })
	sort.Strings(b.Notes)
	b.chooseJSON()
	return b, nil
}

type walker struct {
	p       *prober
	b       *Bundle
	globals map[string]*Flag // flags of the root's help and of "BIN options" (kubectl's global flags)
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
}

func (w *walker) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *walker) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Notes = append(w.b.Notes, fmt.Sprintf(format, args...))
}

// skipped are commands every Cobra program has that are no tools.
var skipped = map[string]bool{"help": true, "completion": true, "__complete": true, "__completeNoDesc": true}

func (w *walker) root(ctx context.Context, h *Help) {
	listed, _ := w.p.complete(ctx, "")
	hasOptions := false
	for _, c := range listed {
		hasOptions = hasOptions || c.value == "options"
	}
	if hasOptions { // kubectl lists its global flags only in "kubectl options"
		if out, _, err := w.p.run(ctx, "options"); err == nil {
			for n, f := range ParseHelp(out).Flags {
				f.Inherited = true
				w.globals[n] = f
			}
		}
	}
	w.node(ctx, nil, h)
}

// node handles one command whose help has been read: recurse into its subcommands, or make it a tool.
func (w *walker) node(ctx context.Context, path []string, h *Help) {
	w.b.opts.Logf("probing %s %s", w.b.Root, strings.Join(path, " "))
	usageLine, group, runnable := w.usage(path, h)
	var children []string
	if group || len(h.Commands) > 0 {
		listed, ok := w.p.complete(ctx, append(append([]string(nil), path...), "")...)
		for _, c := range listed {
			if strings.HasPrefix(c.value, "-") || skipped[c.value] || (ok && len(h.Commands) > 0 && !slices.Contains(h.Commands, c.value)) {
				continue
			}
			children = append(children, c.value)
		}
	}
	for _, c := range children {
		child := append(append([]string(nil), path...), c)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			ch, err := w.p.help(ctx, child)
			if err != nil {
				w.note("%s: %v", strings.Join(child, " "), err)
				return
			}
			if !usageMatches(w.b.Root, child, ch) {
				return // an alias or a ValidArgs value: the help is another command's
			}
			w.node(ctx, child, ch)
		}()
	}
	if !runnable {
		return
	}
	if len(children) > 0 {
		if len(path) > 0 || slices.Contains(children, w.b.Root) {
			// a command tree has no room for a group that is also a leaf
			w.note("%s: runnable and has subcommands; only its subcommands are tools", w.b.Root+" "+strings.Join(path, " "))
			return
		}
		// The root command runs too (hugo builds the site): it is a tool of its own, named after
		// the program, beside the subcommands.
		w.note("%s: the program itself runs (and has subcommands): it is the tool %q", w.b.Root, w.b.Root)
	}
	t, err := w.tool(ctx, path, h, usageLine)
	if err != nil {
		w.fail(err)
		return
	}
	if t != nil {
		w.mu.Lock()
		w.b.Tools = append(w.b.Tools, t)
		w.mu.Unlock()
	}
}

// usage finds the command's own usage line: its text after the command path, whether a
// "[command]" line marks it as a group, and whether it has a runnable line.
func (w *walker) usage(path []string, h *Help) (rest string, group, runnable bool) {
	prefix := append([]string{w.b.Root}, path...)
	for _, u := range h.Usage {
		f := strings.Fields(u)
		if len(f) < len(prefix) || !slices.Equal(f[:len(prefix)], prefix) {
			continue
		}
		r := strings.Join(f[len(prefix):], " ")
		if groupLine(r) {
			group = true
			continue
		}
		if !runnable {
			rest, runnable = r, true
		}
	}
	return rest, group, runnable
}

func usageMatches(root string, path []string, h *Help) bool {
	prefix := append([]string{root}, path...)
	for _, u := range h.Usage {
		if f := strings.Fields(u); len(f) >= len(prefix) && slices.Equal(f[:len(prefix)], prefix) {
			return true
		}
	}
	return false
}

// tool builds one runnable command's tool: its flags (with required ones found through
// __complete) and positionals.
func (w *walker) tool(ctx context.Context, path []string, h *Help, usageLine string) (*Tool, error) {
	cmd := strings.Join(append([]string{w.b.Root}, path...), " ")
	t := &Tool{Path: path, Usage: strings.TrimSpace(cmd + " " + usageLine)}
	t.Description = firstParagraph(h.Description)
	t.Short = firstLine(t.Description)
	lookup := func(name string) *Flag {
		if f, ok := h.Flags[name]; ok {
			return f
		}
		return w.globals[name]
	}
	listed, ok := w.p.complete(ctx, append(append([]string(nil), path...), "-")...)
	var names []string
	raw := map[string]string{}
	required := map[string]bool{}
	collect := func(list []completion) {
		for _, c := range list {
			if n, ok := strings.CutPrefix(c.value, "--"); ok && n != "" {
				if _, dup := raw[n]; !dup {
					names = append(names, n)
				}
				raw[n] = c.desc
			}
		}
	}
	collect(listed)
	if ok && len(names) > 0 && !slices.Contains(names, "help") {
		// Only required flags are listed while one is unset: give each and list again.
		args := append([]string(nil), path...)
		for _, n := range names {
			required[n] = true
			f := lookup(n)
			if f == nil {
				f = &Flag{Name: n, Type: "string"}
			}
			if v, hasValue := dummy(f); hasValue {
				args = append(args, "--"+n+"="+v)
			} else {
				args = append(args, "--"+n)
			}
		}
		all, _ := w.p.complete(ctx, append(args, "-")...)
		collect(all)
	}
	if !ok || len(names) == 0 { // no completion for flags: the help is all there is
		for n := range h.Flags {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	args := usage.ParseArgs(usageLine)
	taken := map[string]bool{}
	for _, n := range names {
		if n == "help" || (len(path) == 0 && n == "version") {
			continue
		}
		f := lookup(n)
		if f == nil {
			f = &Flag{Name: n, Type: "string", Usage: backquoted.ReplaceAllString(raw[n], "$1")}
		}
		c := *f
		if c.Deprecated {
			continue
		}
		if m := backquoted.FindStringSubmatch(raw[n]); m != nil && m[1] == c.Type {
			c.TypeKnown = false // the help shows the usage's backquoted value name, not a type
		}
		if !manifest.IsName(n) {
			w.note("%s: flag --%s is left out: its name cannot be an input property", cmd, n)
			continue
		}
		c.Required = required[n]
		t.Flags = append(t.Flags, &c)
		taken[n] = true
		if key := jsonKey(&c); key != "" && t.jsonKey == "" {
			t.jsonKey = key
		}
	}
	for i := range args {
		for taken[args[i].Name] || !manifest.IsName(args[i].Name) {
			if !manifest.IsName(args[i].Name) {
				args[i].Name = "arg_" + args[i].Name
				continue
			}
			args[i].Name += "_arg"
		}
		taken[args[i].Name] = true
	}
	t.Args = args
	return t, nil
}

var jsonWord = regexp.MustCompile(`(?i)\bjson\b`)

// jsonKey names the JSON output flag a command has: "--json" (a bool), "--output json" or
// "--format json" (a string flag whose usage mentions json).
func jsonKey(f *Flag) string {
	switch {
	case f.Name == "json" && f.Type == "bool":
		return "--json"
	case (f.Name == "output" || f.Name == "format") && (f.Type == "string" || !f.TypeKnown) && jsonWord.MatchString(f.Usage):
		return "--" + f.Name + " json"
	}
	return ""
}

// chooseJSON makes the most common JSON flag the bundle's output.json_flag; the tools that have it
// ask for JSON (and do not offer the flag as an input).
func (b *Bundle) chooseJSON() {
	count := map[string]int{}
	best := ""
	for _, t := range b.Tools {
		if t.jsonKey != "" {
			count[t.jsonKey]++
			if count[t.jsonKey] > count[best] || (count[t.jsonKey] == count[best] && t.jsonKey < best) {
				best = t.jsonKey
			}
		}
	}
	if best == "" {
		return
	}
	f := strings.Fields(best)
	b.JSONFlag, b.JSONFlagArgs = f[0], f[1:]
	name := strings.TrimPrefix(f[0], "--")
	for _, t := range b.Tools {
		if t.jsonKey != best {
			continue
		}
		t.JSON = true
		kept := t.Flags[:0]
		for _, fl := range t.Flags {
			if fl.Name != name {
				kept = append(kept, fl)
			}
		}
		t.Flags = kept
	}
}

var versionNumber = regexp.MustCompile(`v?([0-9]+\.[0-9]+(?:\.[0-9]+)?)`)

// findVersion tries "BIN --version", "BIN version" and "BIN version --client" and makes a
// version_check whose parse pattern is the text before the number on its line.
func (b *Bundle) findVersion(ctx context.Context, p *prober) error {
	for _, args := range [][]string{{"--version"}, {"version"}, {"version", "--client"}} {
		out, errOut, exit, err := p.runExit(ctx, args...)
		if err != nil || exit != 0 {
			continue
		}
		for _, text := range []string{out, errOut} {
			for _, line := range strings.Split(text, "\n") {
				m := versionNumber.FindStringSubmatchIndex(line)
				if m == nil || strings.Contains(strings.ToLower(line), "unknown") || strings.Contains(strings.ToLower(line), "error") {
					continue
				}
				prefix := strings.TrimLeft(line[:m[0]], " \t")
				if len(prefix) > 40 {
					prefix = prefix[len(prefix)-40:]
				}
				b.Version = line[m[2]:m[3]]
				b.VersionCmd = strings.Join(append([]string{b.Bin}, args...), " ")
				vp := regexp.QuoteMeta(prefix)
				if strings.HasPrefix(line[m[0]:], "v") {
					vp += "v?"
				}
				b.VersionParse = vp + `(\d+\.\d+(?:\.\d+)?)`
				return nil
			}
		}
	}
	return fmt.Errorf("%s: found no version number in the output of --version, version or version --client", b.Root)
}

// guessInstall says how to install the binary: the Debian package that owns it, else "go install"
// of the main package recorded in a Go binary, else an apt package named after the binary.
func guessInstall(path, base string) []Install {
	for _, p := range []string{path, evalSymlinks(path)} {
		if out, err := exec.Command("dpkg-query", "-S", p).Output(); err == nil {
			if pkg, _, ok := strings.Cut(strings.TrimSpace(string(out)), ":"); ok && pkg != "" && !strings.ContainsAny(pkg, " ,") {
				return []Install{{Method: "apt", Package: pkg}}
			}
		}
	}
	if mod := goMainPackage(path); mod != "" {
		return []Install{{Method: "go", Package: mod + "@latest"}}
	}
	return []Install{{Method: "apt", Package: base}}
}

// goMainPackage is the main package path a Go binary records, or "".
func goMainPackage(path string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil || info.Path == "" || info.Path == "command-line-arguments" || !strings.Contains(strings.Split(info.Path, "/")[0], ".") {
		return ""
	}
	return info.Path
}

func evalSymlinks(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

var idCleaner = regexp.MustCompile(`[^a-z0-9-]+`)

// BundleID turns a name (a binary's, a folder's) into a CLI.md id: 2–64 of a-z 0-9 -.
func BundleID(base string) string {
	id := strings.Trim(idCleaner.ReplaceAllString(strings.ToLower(base), "-"), "-")
	for len(id) < 2 {
		id += "x"
	}
	if len(id) > 64 {
		id = strings.Trim(id[:64], "-")
	}
	return id
}

func firstParagraph(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n\n"); i > 0 {
		s = s[:i]
	}
	return strings.Join(strings.Fields(s), " ")
}

func firstLine(s string) string {
	if i := strings.Index(s, ". "); i > 0 {
		return s[:i+1]
	}
	return s
}

// groupLine reports whether a usage line (already without the command path) is the "PATH
// [command]" line of a command group rather than a runnable usage.
func groupLine(rest string) bool {
	f := strings.Fields(rest)
	if len(f) == 0 {
		return false
	}
	w := strings.ToLower(strings.Trim(f[0], "[]<>{}"))
	return w == "command" || w == "subcommand"
}
