package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost"
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/install"
)

// installOptions are install's flags and argument.
type installOptions struct {
	*globalOptions
	req    control.InstallRequest
	asJSON bool
}

// newInstallCmd is clihostctl install; runF, when set, runs instead of runInstall (tests).
func newInstallCmd(g *globalOptions, runF func(*installOptions) error) *cobra.Command {
	o := &installOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "install BUNDLE",
		Short: "Install a bundle's CLI through the daemon",
		Long: `Install asks clihostd to install the CLI: the bundle's install entries are tried in order
(downloads are verified against verify_sha256 before anything is placed), the version is checked,
and a mismatch reinstalls once. A CLI already installed in a matching version is left alone.

Entries that need root (apt, dnf, pacman; pip outside a virtualenv) are run by a root daemon
itself. When the daemon is not root (the systemd unit runs it as clihost), run this command with
sudo: clihostctl then runs those entries itself, as root, in the bundle's order, and the daemon
finds the binary, checks its version in the sandbox and records it.`,
		Example: "  clihostctl install jq\n  sudo clihostctl install gh\n  clihostctl install gh --force",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.req.Bundle = args[0]
			o.req.HandOff = os.Geteuid() == 0
			if runF != nil {
				return runF(o)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runInstall(ctx, o)
		},
	}
	cmd.Flags().BoolVar(&o.req.AllowUnverified, "allow-unverified", false, "let curl installer scripts without a checksum run")
	cmd.Flags().BoolVar(&o.req.Force, "force", false, "reinstall even when a matching version is present")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the final result as JSON")
	return cmd
}

// runInstall installs o.req.Bundle through the daemon, printing its steps on stderr and the
// download's progress when stderr is a terminal.
func runInstall(ctx context.Context, o *installOptions) error {
	bar := progressBar{w: o.io.ErrOut, draw: o.io.IsStderrTTY()}
	running := newRunningStatus(o.io)
	last, err := o.install(ctx, o.req, func(ev control.InstallEvent) {
		if o.asJSON {
			return
		}
		switch ev.Phase {
		case "progress":
			running.done()
			bar.update(ev.Done, ev.Total)
		case "running":
			bar.done()
			running.update(ev)
		case "checking", "installing":
			bar.done()
			running.done()
			fmt.Fprintln(o.io.ErrOut, plain(ev.Message))
		}
	})
	bar.done()
	running.done()
	if err != nil {
		return errors.New(plain(err.Error()))
	}
	if o.asJSON {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(last); err != nil {
			return err
		}
	} else if last.Phase == "done" {
		fmt.Fprintln(o.io.Out, plain(last.Message))
	}
	if last.Phase != "done" {
		if !o.asJSON {
			fmt.Fprintf(o.io.ErrOut, "clihostctl: install failed: %s\n", plain(last.Message))
			if last.Error != nil && last.Error.Hint != "" {
				fmt.Fprintf(o.io.ErrOut, "hint: %s\n", plain(last.Error.Hint))
			}
		}
		return exitError{1}
	}
	return nil
}

// install asks the daemon to install; each entry it hands back because it needs root (the caller
// is root and the daemon is not) is run here, then recorded by the daemon, or, when it fails, the
// daemon resumes the bundle's install list after it. It returns the last event.
func (g *globalOptions) install(ctx context.Context, req control.InstallRequest, progress func(control.InstallEvent)) (control.InstallEvent, error) {
	c := g.client()
	var failed []string // entries run here that failed, with why
	for {
		last, err := c.Install(ctx, req, progress)
		if err != nil || last.Phase != "needs_root" {
			if err == nil && last.Phase == "error" && len(failed) > 0 {
				last.Message = strings.Join(failed, "; ") + "; " + last.Message
			}
			return last, err
		}
		if len(last.NeedsRoot) != 1 || last.NeedsRoot[0].Index < req.From {
			return last, fmt.Errorf("clihostd handed back %v after entry %d: not an entry to run", last.NeedsRoot, req.From)
		}
		e := last.NeedsRoot[0]
		h, b, err := g.rootBundle(ctx, req.Bundle, e)
		if err != nil {
			return last, err
		}
		fmt.Fprintf(g.io.ErrOut, "clihostd is not root: running install[%d] (%s %s) here as root\n", e.Index, plain(e.Tool), e.Package)
		err = h.InstallEntry(ctx, req.Bundle, e.Index, g.io.ErrOut)
		h.Close()
		if err != nil {
			if ctx.Err() != nil {
				return last, err
			}
			reason := fmt.Sprintf("install[%d] (%s): %s", e.Index, e.Method, trimInstallPrefix(err))
			fmt.Fprintln(g.io.ErrOut, reason)
			failed = append(failed, reason)
			if req.From = e.Index + 1; req.From >= len(b.Install) {
				msg := "no install entry succeeded: " + strings.Join(failed, "; ")
				return control.InstallEvent{Phase: "error", Message: msg, Error: &callresult.Error{Code: errcode.InstallFailed, Message: msg,
					Hint: "each install entry's reason is listed; install the CLI by hand, or fix the bundle's install entries"}}, nil
			}
			continue
		}
		progress(control.InstallEvent{Phase: "checking", Message: "clihostd is checking and recording " + b.Bin})
		return c.RecordInstall(ctx, control.RecordRequest{Bundle: req.Bundle, Index: e.Index, Method: e.Method})
	}
}

// rootBundle is the bundle whose install entry e clihostctl runs as root, with the Host (package
// clihost) that runs it (closed by the caller): loaded by clihostctl
// itself (--bundles, $CLIHOST_BUNDLES, ./.cli and the catalog), never taken from the daemon, which
// runs as a less privileged user; the daemon's entry must be the same one.
func (g *globalOptions) rootBundle(ctx context.Context, name string, e control.RootEntry) (*clihost.Host, clihost.Bundle, error) {
	fix := func(why string) error {
		where := ""
		if st, err := g.client().Status(ctx, name); err == nil && len(st) == 1 {
			where = " (clihostd loaded it from " + st[0].File + ")"
		}
		return fmt.Errorf("%s%s: run clihostctl with the daemon's bundles, e.g. sudo clihostctl --bundles /etc/clihost/bundles install %s", why, where, name)
	}
	h, err := clihost.New(ctx, g.bundleOption())
	if err != nil {
		return nil, clihost.Bundle{}, err
	}
	b, err := h.Bundle(name)
	if err != nil {
		h.Close()
		return nil, clihost.Bundle{}, fix(fmt.Sprintf("clihostctl does not load bundle %s", name))
	}
	if e.Index >= len(b.Install) || b.Install[e.Index].Method != e.Method || b.Install[e.Index].Package != e.Package {
		h.Close()
		return nil, clihost.Bundle{}, fix(fmt.Sprintf("clihostctl's bundle %s (%s) differs from clihostd's: its install[%d] is not %s %s", b.Key, b.File, e.Index, e.Method, e.Package))
	}
	if b.Dir != "" { // not the catalog built into this binary
		if err := rootOnly(filepath.Join(b.Dir, "CLI.md")); err != nil {
			h.Close()
			return nil, clihost.Bundle{}, fmt.Errorf("not running %s as root from bundle %s: %w (make the bundle folder root's: chown -R root: and chmod go-w)", e.Tool, b.Key, err)
		}
	}
	return h, b, nil
}

// rootOnly checks that only root can change the file at p, or what p names: p is resolved one
// component at a time from /, and every directory an entry is looked up in, every symbolic link
// followed and the file itself must belong to root and not be writable by group or others (a
// directory with the sticky bit, /tmp, may be: others cannot replace root's entries there). A
// bundle folder the daemon's user may write (a compromised daemon) must not choose what root
// installs. Checking only the fully resolved path let a user who can write a folder on the named
// path (or on a link's way) swap a symbolic link to root's own bundle in after clihostctl had
// read the user's file: the check then passed on root's.
func rootOnly(p string) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	if err := rootEntry("/"); err != nil {
		return err
	}
	cur, rest, links := "/", splitNames(abs), 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		next := filepath.Join(cur, name)
		if name == ".." {
			cur = next // a folder above one already checked: on the checked path
			continue
		}
		if err := rootEntry(next); err != nil {
			return err
		}
		st, err := os.Lstat(next)
		if err != nil {
			return err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > 40 {
			return fmt.Errorf("%s: too many symbolic links", abs)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(splitNames(target), rest...)
	}
	return nil
}

// splitNames is the names of p's components ("." and empty ones left out, ".." kept).
func splitNames(p string) []string {
	var out []string
	for _, n := range strings.Split(p, "/") {
		if n != "" && n != "." {
			out = append(out, n)
		}
	}
	return out
}

// rootEntry checks one file, directory or symbolic link (not followed): root's, and not writable
// by group or others unless it is a sticky directory or a link (whose mode means nothing).
func rootEntry(p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !ok || sys.Uid != 0:
		return fmt.Errorf("%s does not belong to root", p)
	case st.Mode()&os.ModeSymlink == 0 && st.Mode().Perm()&0o022 != 0 && !(st.IsDir() && st.Mode()&os.ModeSticky != 0):
		return fmt.Errorf("%s is writable by group or others (mode %s)", p, st.Mode().Perm())
	}
	return nil
}

// plain is text from the daemon made safe to print on a terminal: control characters other than
// newline and tab (ESC starting a terminal escape sequence, BEL, the C1 controls, DEL) are shown as
// \xNN. Under sudo, clihostctl prints as root what whoever listens on the control socket says (the
// daemon's user owns /run/clihost): a compromised daemon must not drive root's terminal (retitle
// it, rewrite what was printed, or answer-back sequences some terminals type into the shell).
func plain(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isControl reports whether r is a control character other than newline and tab.
func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r >= 0x7f && r < 0xa0)
}

// trimInstallPrefix drops the "install KEY: install failed: install[i] (method): " an entry's
// error starts with, and a "skipped: ".
func trimInstallPrefix(err error) string {
	s := err.Error()
	if i := strings.Index(s, "): "); i >= 0 && errors.Is(err, install.ErrInstallFailed) {
		s = s[i+3:]
	}
	return strings.TrimPrefix(s, "skipped: ")
}

// progressBar draws a download's progress on one terminal line; it draws nothing unless draw (the
// line is a terminal).
type progressBar struct {
	w      io.Writer
	draw   bool
	active bool
	last   int
}

func (p *progressBar) update(done, total int64) {
	const width = 30
	if !p.draw {
		return
	}
	if total > 0 {
		pct := int(done * 100 / total)
		if p.active && pct == p.last {
			return
		}
		p.last = pct
		filled := width * pct / 100
		fmt.Fprintf(p.w, "\r[%s%s] %3d%% %s / %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), pct, size(done), size(total))
	} else {
		fmt.Fprintf(p.w, "\r%s downloaded", size(done))
	}
	p.active = true
}

func (p *progressBar) done() {
	if p.active {
		fmt.Fprintln(p.w)
		p.active = false
	}
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
