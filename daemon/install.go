package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/store"
)

// handOff reports whether an install stops at the first entry that needs root and hands it to the
// caller: the caller asked (clihostctl under sudo does), is root by its SO_PEERCRED credentials,
// and this daemon is not root (a root daemon runs package managers itself).
func handOff(ctx context.Context, req control.InstallRequest) bool {
	p, ok := control.PeerOf(ctx)
	return req.HandOff && ok && p.UID == 0 && os.Geteuid() != 0
}

// installError is the last event of an install that did not succeed: the entry handed to a root
// caller ("needs_root"), the needs_root error when only entries that need root could have
// installed the CLI, or install_failed.
func (d *Engine) installError(b *manifest.Bundle, res install.Result, err error) control.InstallEvent {
	if nr := (*install.NeedsRootError)(nil); errors.As(err, &nr) {
		e := control.RootEntry{Index: nr.Index, Method: nr.Method, Package: nr.Package, Tool: nr.Tool}
		return control.InstallEvent{Phase: "needs_root", NeedsRoot: []control.RootEntry{e},
			Message: fmt.Sprintf("install[%d] (%s %s) needs root: clihostctl runs it", e.Index, e.Tool, e.Package)}
	}
	d.log.Warn("install failed", "bundle", b.Key(), "err", err)
	if re := (*install.RequiresError)(nil); errors.As(err, &re) {
		return control.InstallEvent{Phase: "error", Message: err.Error(), Error: &callresult.Error{Code: errcode.InsufficientResources, Message: re.Message, Hint: re.Hint}}
	}
	var root []control.RootEntry
	for _, s := range res.Skipped {
		if s.NeedsRoot != "" {
			e := b.CLI.Install[s.Index]
			root = append(root, control.RootEntry{Index: s.Index, Method: s.Method, Package: e.Package, Tool: s.NeedsRoot})
		}
	}
	if len(root) == 0 || !errors.Is(err, install.ErrInstallFailed) || errors.Is(err, context.Canceled) {
		return control.InstallEvent{Phase: "error", Message: err.Error(), Error: &callresult.Error{Code: errcode.InstallFailed, Message: err.Error(), Hint: installFailedHint(err)}}
	}
	msg := fmt.Sprintf("%s needs root: run %s", root[0].Tool, sudoInstall(b))
	hint := fmt.Sprintf("clihostd runs as %s, not root, and does not run package managers that need root; "+
		"under sudo, clihostctl runs %s itself and the daemon then checks and records the CLI. All entries: %s",
		daemonUser(), root[0].Tool, err.Error())
	return control.InstallEvent{Phase: "error", Message: msg, NeedsRoot: root,
		Error: &callresult.Error{Code: errcode.NeedsRoot, Category: "permission", Message: msg, Hint: hint}}
}

// sudoInstall is the command that installs b as root: clihostctl under sudo runs only bundles it
// loads itself, so a bundle the daemon loaded from a folder is named with --bundles.
func sudoInstall(b *manifest.Bundle) string {
	if b.OSDir == "" {
		return "sudo clihostctl install " + b.ID()
	}
	return "sudo clihostctl --bundles " + b.OSDir + " install " + b.ID()
}

// RecordInstall implements control.Backend: after a root caller ran install entry req.Index (a
// package manager this daemon may not run), it finds the binary itself where the install would
// (the entry's directories, then the daemon's PATH), checks its version in the sandbox as a call
// would, and records the result as after an install of its own. Nothing the caller says about the
// binary is used: a binary that is missing or fails the check is refused and nothing is recorded.
func (d *Engine) RecordInstall(ctx context.Context, req control.RecordRequest) control.InstallEvent {
	st := d.cur.Load()
	b, err := st.host.Bundle(req.Bundle)
	if err != nil {
		return control.InstallEvent{Phase: "error", Message: err.Error(), Error: &callresult.Error{Code: errcode.NotFound, Message: err.Error(), Hint: "clihostctl status lists the loaded bundles"}}
	}
	if req.Index < 0 || req.Index >= len(b.CLI.Install) || b.CLI.Install[req.Index].Method != req.Method {
		return recordRefused(fmt.Sprintf("%s has no install entry %d with method %q", b.Key(), req.Index, req.Method),
			"clihostctl and clihostd load different versions of the bundle: give clihostctl the daemon's bundles (--bundles)")
	}
	if _, ok := install.NeedsRoot(b, req.Index, nil); !ok {
		return recordRefused(fmt.Sprintf("install[%d] (%s) of %s does not need root: clihostd runs it itself", req.Index, req.Method, b.Key()),
			"run: clihostctl install "+b.ID())
	}
	d.installMu.Lock()
	defer d.installMu.Unlock()
	path, err := install.Find(b, req.Index, install.Options{})
	if err != nil {
		msg := fmt.Sprintf("clihostd does not find %s after install[%d] (%s): %s", b.CLI.Bin, req.Index, req.Method, strings.TrimPrefix(err.Error(), "skipped: "))
		return control.InstallEvent{Phase: "error", Message: msg, Error: &callresult.Error{Code: errcode.NotInstalled, Message: msg,
			Hint: "the binary must be on clihostd's PATH (the unit's PATH, not the administrator's); nothing was recorded"}}
	}
	var prev installRecord
	_, hadPrev, _ := d.store.Get(store.BucketInstall, b.Key(), &prev)
	if _, err := d.store.Put(store.BucketInstall, b.Key(), installRecord{Method: req.Method, BinPath: path, InstalledAt: time.Now().UTC()}); err != nil {
		return control.InstallEvent{Phase: "error", Message: "recording the install: " + err.Error()}
	}
	st.host.Forget(b)
	vpath, ver, verr := st.host.Verify(ctx, b, d.workspace)
	if verr != nil {
		if hadPrev {
			_, _ = d.store.Put(store.BucketInstall, b.Key(), prev)
		} else {
			_ = d.store.Delete(store.BucketInstall, b.Key())
		}
		st.host.Forget(b)
		d.log.Warn("install record refused: the version check failed", "bundle", b.Key(), "bin", path, "err", verr.Message)
		return control.InstallEvent{Phase: "error", Message: verr.Message, Error: verr}
	}
	if _, err := d.store.Put(store.BucketInstall, b.Key(), installRecord{Method: req.Method, BinPath: vpath, Version: ver, InstalledAt: time.Now().UTC()}); err != nil {
		return control.InstallEvent{Phase: "error", Message: "recording the install: " + err.Error()}
	}
	p, _ := control.PeerOf(ctx)
	d.log.Info("installed", "bundle", b.Key(), "method", req.Method, "bin", vpath, "version", ver, "run_by_uid", p.UID, "run_by_pid", p.PID)
	return control.InstallEvent{Phase: "done", Message: fmt.Sprintf("installed %s %s with %s", b.CLI.Bin, ver, req.Method),
		Method: req.Method, BinPath: vpath, Version: ver}
}

// recordRefused is a record request that names no entry the daemon could record.
func recordRefused(msg, hint string) control.InstallEvent {
	return control.InstallEvent{Phase: "error", Message: msg, Error: &callresult.Error{Code: errcode.RecordRefused, Message: msg, Hint: hint}}
}

// Install implements control.Backend: it installs when the binary is missing or fails its version
// check, checks the version after installing, reinstalls once on a mismatch, and records the result.
// progress is called from more than one goroutine (the "running" reports come from a ticker's): it
// must be safe for concurrent use, as the control server's stream is.
func (d *Engine) Install(ctx context.Context, req control.InstallRequest, progress func(control.InstallEvent)) control.InstallEvent {
	st := d.cur.Load()
	b, err := st.host.Bundle(req.Bundle)
	if err != nil {
		return control.InstallEvent{Phase: "error", Message: err.Error(), Error: &callresult.Error{Code: errcode.NotFound, Message: err.Error(), Hint: "clihostctl status lists the loaded bundles"}}
	}
	d.installMu.Lock()
	defer d.installMu.Unlock()
	progress(control.InstallEvent{Phase: "checking", Message: "checking " + b.CLI.Bin})
	if !req.Force {
		if path, ver, verr := st.host.Verify(ctx, b, d.workspace); verr == nil {
			return control.InstallEvent{Phase: "done", Message: fmt.Sprintf("%s %s is already installed at %s", b.CLI.Bin, ver, path), BinPath: path, Version: ver}
		}
	}
	var last *host.Error
	for attempt := 1; attempt <= 2; attempt++ {
		msg := fmt.Sprintf("installing %s (attempt %d)", b.CLI.Bin, attempt)
		progress(control.InstallEvent{Phase: "installing", Message: msg})
		running := startRunning(msg, progress, time.Second)
		res, err := install.Install(ctx, b, install.Options{StateDir: d.stateDir, AllowUnverified: req.AllowUnverified,
			Privileged: os.Geteuid() == 0, HandOff: handOff(ctx, req), From: req.From, Log: d.log, OutputLine: running.line,
			Progress: func(done, total int64) { progress(control.InstallEvent{Phase: "progress", Done: done, Total: total}) }})
		running.stop()
		if err != nil {
			return d.installError(b, res, err)
		}
		if _, err := d.store.Put(store.BucketInstall, b.Key(), installRecord{Method: res.Method, BinPath: res.BinPath, InstalledAt: time.Now().UTC()}); err != nil {
			return control.InstallEvent{Phase: "error", Message: "recording the install: " + err.Error()}
		}
		st.host.Forget(b)
		path, ver, verr := st.host.Verify(ctx, b, d.workspace)
		if verr == nil {
			_, _ = d.store.Put(store.BucketInstall, b.Key(), installRecord{Method: res.Method, BinPath: path, Version: ver, InstalledAt: time.Now().UTC()})
			d.log.Info("installed", "bundle", b.Key(), "method", res.Method, "bin", path, "version", ver)
			return control.InstallEvent{Phase: "done", Message: fmt.Sprintf("installed %s %s with %s", b.CLI.Bin, ver, res.Method), Method: res.Method, BinPath: path, Version: ver}
		}
		last = verr
		req.Force = true
	}
	return control.InstallEvent{Phase: "error", Message: last.Message, Error: last}
}

func installFailedHint(err error) string {
	var ce *install.ChecksumError
	if errors.As(err, &ce) {
		return "the download does not match the bundle's verify_sha256; nothing was installed. Report it to the bundle's author"
	}
	return "each install entry's reason is listed; install the CLI by hand, or fix the bundle's install entries"
}
