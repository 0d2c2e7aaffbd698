package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// openOptions are open's flags.
type openOptions struct {
	*globalOptions
	print  bool // print the URL instead of opening it
	asJSON bool
	// browse opens a URL in the desktop's browser (xdg-open); tests replace it.
	browse func(u string) error
}

// newOpenCmd is clihostctl open; runF, when set, runs instead of runOpen (tests).
func newOpenCmd(g *globalOptions, runF func(*openOptions) error) *cobra.Command {
	o := &openOptions{globalOptions: g, browse: xdgOpen}
	cmd := &cobra.Command{
		Use:   "open",
		Short: "Open the daemon's status page in a browser on this machine (a one-time login link)",
		Long: `Open asks clihostd for a one-time login link of its status page (bundles and readiness, recent
calls, egress decisions, limits, the sandbox) and opens it with xdg-open, or prints it when
there is no desktop or with --print. The link works once, within two minutes, from this machine
(loopback) only; the browser that opens it gets a session cookie for the page, valid for 8 hours
or until the daemon restarts. Root and the daemon's own user only (the page shows every caller's
calls, as the audit log does). From another machine, send the bearer token instead
(clihostctl token).`,
		Example: `  clihostctl open
  sudo clihostctl open --print`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(o)
			}
			return runOpen(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.print, "print", false, "print the login URL instead of opening a browser")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the login URL and its expiry as JSON (opens nothing)")
	return cmd
}

// runOpen mints a login link and opens or prints it.
func runOpen(ctx context.Context, o *openOptions) error {
	login, err := o.client().PageLogin(ctx)
	if err != nil {
		return err
	}
	if !loopbackWebURL(login.URL) {
		return fmt.Errorf("clihostd answered with a login URL that is not an http URL on loopback: %q", login.URL)
	}
	if o.asJSON {
		return json.NewEncoder(o.io.Out).Encode(login)
	}
	until := login.Expires.Local().Format(time.TimeOnly)
	if !o.print && hasDesktop() {
		if err := browsePrivately(o.browse, login.URL); err == nil {
			fmt.Fprintf(o.io.ErrOut, "opened clihostd's status page in your browser (the link works once, until %s)\n"+
				"(a browser that cannot read the private page it was given, such as a snap, says the file is missing: then run clihostctl open --print and paste the link)\n", until)
			return nil
		}
	}
	fmt.Fprintln(o.io.Out, login.URL)
	fmt.Fprintf(o.io.ErrOut, "open this link in a browser on this machine: it works once, until %s\n", until)
	return nil
}

// openPagePrefix names the folders of the pages browsePrivately hands the browser.
const openPagePrefix = "clihost-open-"

// openPageTTL is how long such a page is kept: the daemon's login link expires within 2 minutes.
const openPageTTL = 5 * time.Minute

// browsePrivately opens link through a page that only this user can read (0600, in a 0700 folder
// of $XDG_RUNTIME_DIR or the temporary folder) and that sends the browser on to link: a
// command line is public (every local user reads /proc/PID/cmdline of xdg-open and the browser),
// and a link there would give its one-time code to whoever redeems it first. Pages of earlier
// opens, past their link's life, are removed.
func browsePrivately(browse func(string) error, link string) error {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if st, err := os.Stat(base); base == "" || err != nil || !st.IsDir() {
		base = os.TempDir()
	}
	sweepOpenPages(base)
	dir, err := os.MkdirTemp(base, openPagePrefix)
	if err != nil {
		return fmt.Errorf("a private folder for the login page: %w", err)
	}
	page := filepath.Join(dir, "login.html")
	esc := html.EscapeString(link)
	body := `<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">` +
		`<meta http-equiv="refresh" content="0;url=` + esc + `"><title>clihostd status</title>` +
		`<p><a href="` + esc + `">Open clihostd's status page</a></p>` + "\n"
	if err := os.WriteFile(page, []byte(body), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("the login page: %w", err)
	}
	if err := browse((&url.URL{Scheme: "file", Path: page}).String()); err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	return nil
}

// sweepOpenPages removes this user's login pages in base older than openPageTTL (their links
// have expired).
func sweepOpenPages(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, openPagePrefix+"*"))
	for _, d := range dirs {
		st, err := os.Lstat(d)
		if err != nil || !st.IsDir() || time.Since(st.ModTime()) < openPageTTL {
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == os.Geteuid() {
			_ = os.RemoveAll(d)
		}
	}
}

// loopbackWebURL reports whether u is an http URL whose host is a loopback address: the only kind
// open hands to a browser (the URL comes from the daemon, maybe another user's process).
func loopbackWebURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" {
		return false
	}
	ip := net.ParseIP(p.Hostname())
	return ip != nil && ip.IsLoopback()
}

// hasDesktop reports whether a graphical session may show a browser: DISPLAY or WAYLAND_DISPLAY
// is set and xdg-open is installed.
func hasDesktop() bool {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return false
	}
	_, err := exec.LookPath("xdg-open")
	return err == nil
}

// xdgOpen hands u to xdg-open, which starts the desktop's browser. Its failure within a few
// seconds (no browser) is an error; one still running then is taken as a browser that opened.
func xdgOpen(u string) error {
	cmd := exec.Command("xdg-open", u)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(3 * time.Second):
		return nil
	}
}
