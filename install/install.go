// Package install installs a bundle's CLI: it tries the install entries of its CLI.md (AIP-29) in
// order until one yields the bundle's bin, skipping entries for other platforms, unknown and
// experimental methods, and package managers that are missing or need privileges the host lacks.
//
// Downloads are hashed while they stream to disk and verified before anything is extracted;
// archives (tar.gz, tar.xz, zip) are checked entry by entry and refused whole when any entry would
// escape; the binary is written under a temporary name, fsynced and renamed into
// <StateDir>/bin/<id>@<major>/<bin>, so that path only ever holds a complete binary. Processes
// (package managers, go, npm, installer scripts) run through package runner with an environment
// built from nothing; the only shell is /bin/sh running a curl method's installer script.
package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/clihost/clihost/manifest"
)

// ErrInstallFailed is wrapped by every error Install returns once it has looked at the bundle's
// install entries: none of them succeeded, or one failed in a way that stops the install (a
// checksum mismatch, a canceled context). The host reports it as install_failed.
var ErrInstallFailed = errors.New("install failed")

// ChecksumError is a download (archive, binary or installer script) whose SHA-256 is not the
// entry's verify_sha256. The file was deleted; nothing from it was placed or run. It stops the
// install: AIP-29 makes verification failure non-negotiable, so later entries are not tried.
type ChecksumError struct {
	URL      string // the URL, without any password
	Expected string // verify_sha256, lower-case hex
	Actual   string // what the download hashed to
}

// Error names the URL and both hashes.
func (e *ChecksumError) Error() string {
	return fmt.Sprintf("sha256 mismatch for %s: expected %s, got %s; the download was discarded "+
		"(the file changed upstream or was tampered with: check the publisher's checksum before updating verify_sha256)",
		e.URL, e.Expected, e.Actual)
}

// Options configures Install.
type Options struct {
	// StateDir is clihost's state directory. Downloaded and go-installed binaries go to
	// <StateDir>/bin/<id>@<major>/, npm and cargo prefixes to <StateDir>/prefix/<id>@<major>/, the go
	// build cache and module cache to <StateDir>/go/. Required.
	StateDir string
	// AllowUnverified lets curl installers without verify_sha256 run.
	AllowUnverified bool
	// Privileged lets the entries that need root run: apt, dnf, pacman, and pip outside a virtualenv
	// without user: true (the caller decides; typically euid 0). Install never uses sudo.
	Privileged bool
	// HandOff, without Privileged, stops the walk at the first entry that needs root, instead of
	// skipping it: Install then returns an error wrapping a *NeedsRootError naming the entry, for a
	// caller that runs it as root itself (RunEntry) and, if that fails, resumes with From past it.
	HandOff bool
	// From is the first install entry tried; earlier entries were tried by the caller (HandOff).
	From int
	// Output, when set, receives the package manager's output as it runs (RunEntry in clihostctl,
	// streaming to the administrator's terminal); by default it is captured and only its last lines
	// end an error.
	Output io.Writer
	// OutputLine, when set (and Output is not), is called with each line a package manager or
	// installer script prints, as it prints it (the daemon's install progress shows the last one);
	// the process runs as without it, its last lines still end an error.
	OutputLine func(line string)
	// OS and Arch are the runtime platform in AIP-29 words (linux, darwin, windows / x64, arm64,
	// x86, arm); empty means this machine.
	OS, Arch string
	// LookupEnv reads the host environment: PATH (to find package managers and installed binaries),
	// HOME, proxy settings and the tool-specific variables each method passes on. Default
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// HTTPClient fetches downloads and installer scripts. Default: a shared client with dial, TLS
	// and response-header timeouts and proxies from the process environment, which refuses
	// redirects from https to http. Whatever the client, a body that delivers nothing for a minute
	// is abandoned.
	HTTPClient *http.Client
	// Progress, when set, is called as a download advances, with the bytes received so far and the
	// announced size (-1 when unknown). It is called from Install's goroutine.
	Progress func(done, total int64)
	// Log receives one record per entry tried or skipped and one per install. Nil discards.
	Log *slog.Logger
}

// Skip is an install entry that was skipped or failed before the one that succeeded.
type Skip struct {
	Index  int    // position in the bundle's install list
	Method string // the entry's method
	Reason string // why it was skipped or how it failed
	// NeedsRoot is the package manager (apt-get, dnf, pacman, pip) when the entry was skipped only
	// because it needs root and Options.Privileged is off; "" otherwise.
	NeedsRoot string
}

// Result is a successful install, or on error the entries that were tried.
type Result struct {
	Index   int    // which install entry succeeded
	Method  string // its method
	BinPath string // absolute path of the installed binary
	Skipped []Skip // entries skipped or failed before, with reasons
}

// BinDir is where Install places the binaries of the bundle with key id@major.
func BinDir(stateDir, key string) string {
	return filepath.Join(stateDir, "bin", key)
}

// flights holds the installs in progress in this process, by state directory and bundle key.
var flights = struct {
	sync.Mutex
	m map[string]*flight
}{m: map[string]*flight{}}

// flight is one install in progress; done is closed once res and err are set.
type flight struct {
	done chan struct{}
	res  Result
	err  error
}

// Install tries b's install entries in order until one succeeds and returns which one did and
// where the binary is. On failure the error wraps ErrInstallFailed and names each entry's reason,
// and Result.Skipped lists them; a checksum mismatch (a *ChecksumError, found with errors.As)
// stops the install without trying later entries.
//
// Entries are skipped (with the reason in Result.Skipped) when the bundle's requires.os/arch or the
// entry's os/arch do not include the runtime platform, when the method is unknown or the entry is
// experimental, when the package manager is not on PATH, when an entry that needs root (apt, dnf,
// pacman; pip outside a virtualenv without user: true) would run without Options.Privileged (its
// Skip.NeedsRoot names the program; with Options.HandOff the walk stops there instead, returning a
// *NeedsRootError for the caller to run it as root with RunEntry), and when a curl installer has no
// verify_sha256 and AllowUnverified is off. Entries before Options.From are not tried.
//
// The methods:
//   - apt, dnf, pacman, brew, choco, scoop, pip: the package manager's own install command
//     (apt-get install -y --no-install-recommends -o APT::Cmd::Pattern-Only=true, dnf install -y, pacman -S --noconfirm,
//     brew install, choco install -y, scoop install, pip install [--user]); the binary is then
//     looked up on PATH (after the brew directory, and ~/.local/bin for pip user installs). brew
//     taps a namespaced formula (owner/tap/name) itself.
//   - npm: npm install --prefix <StateDir>/prefix/<key> <package>; the binary is
//     <prefix>/node_modules/.bin/<bin> (or <prefix>/bin/<bin>). global: true installs into the same
//     prefix: clihost never installs npm packages system-wide.
//   - cargo: cargo install --root <StateDir>/prefix/<key> <package>; the binary is <prefix>/bin/<bin>.
//   - go: go install <package> (@latest added when no version is given; a package starting with
//     "./" is built from the bundle folder, as `go install ./cmd/x` run there) with CGO_ENABLED=0,
//     GOFLAGS="-mod=mod -modcacherw", GOWORK=off and GOPATH and GOCACHE under <StateDir>/go; GOBIN is a
//     temporary directory whose <bin> is then placed atomically in BinDir.
//   - download: the URL is fetched, hashed and verified; a tar.gz, tar.xz or zip (recognised by
//     its first bytes) yields the regular file extract_bin; anything else must be an executable
//     (ELF, Mach-O, PE or #!) and is the binary itself. The binary is placed as BinDir/<bin>.
//     Limits: 2 GiB downloaded, 1 GiB for the binary, 8 GiB decompressed while reading an archive.
//   - curl: the installer script is fetched and verified like a download, then run as
//     /bin/sh <script> with only PATH, HOME and proxy variables; the binary is then looked up on PATH.
//   - vendored: <bundle folder>/<path>, which must resolve (symlinks followed) to an executable
//     regular file inside the bundle folder. Embedded bundles have no folder and skip it.
//
// Concurrent Installs of the same bundle into the same StateDir coalesce: in this process the
// later callers wait for the first and receive its result, whatever their own Options (if the
// first caller's context ends first, a waiting caller tries itself); across processes a lock file
// in <StateDir>/bin serialises them. Temporary files left by an interrupted install are removed by
// the next Install of the bundle.
func Install(ctx context.Context, b *manifest.Bundle, o Options) (Result, error) {
	in, err := newInstaller(b, o)
	if err != nil {
		return Result{}, err
	}
	if in.o.StateDir == "" {
		return Result{}, fmt.Errorf("install %s: no state directory", in.key)
	}
	id := in.o.StateDir + "\x00" + in.key
	for {
		flights.Lock()
		f, busy := flights.m[id]
		if !busy {
			f = &flight{done: make(chan struct{})}
			flights.m[id] = f
		}
		flights.Unlock()
		if !busy {
			func() {
				defer func() {
					flights.Lock()
					delete(flights.m, id)
					flights.Unlock()
					close(f.done)
				}()
				f.res, f.err = in.run(ctx)
			}()
			return f.res, f.err
		}
		in.log.Info("waiting for a concurrent install of the same bundle", "bundle", in.key)
		select {
		case <-ctx.Done():
			return Result{}, fmt.Errorf("install %s: waiting for a concurrent install: %w", in.key, ctx.Err())
		case <-f.done:
		}
		if ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
			continue // the first caller gave up; this one still wants the bundle
		}
		res := f.res
		res.Skipped = slices.Clone(res.Skipped)
		return res, f.err
	}
}

// installer is one Install of one bundle.
type installer struct {
	b      *manifest.Bundle
	o      Options
	key    string // id@major
	os     string // runtime platform, AIP-29 words
	arch   string
	log    *slog.Logger
	limits limits
	// replaced holds the descriptors of binaries place replaced, freed when the install is done
	// (releaseReplaced).
	replaced []int
}

// limits bound what a download may cost.
type limits struct {
	download int64 // bytes fetched (archive, raw binary or script)
	binary   int64 // bytes of the extracted binary
	unpacked int64 // bytes decompressed while reading an archive, all entries together
}

var defaultLimits = limits{download: 2 << 30, binary: 1 << 30, unpacked: 8 << 30}

// newInstaller checks b and fills in o's defaults.
func newInstaller(b *manifest.Bundle, o Options) (*installer, error) {
	if b == nil || b.CLI == nil {
		return nil, errors.New("install: no bundle")
	}
	key := b.Key()
	if b.CLI.ID == "" || strings.ContainsAny(key, "/\\\x00") || strings.HasPrefix(key, ".") {
		return nil, fmt.Errorf("install: bundle id %q cannot name a directory", b.CLI.ID)
	}
	if b.CLI.Bin == "" {
		return nil, fmt.Errorf("install %s: the bundle declares no bin", key)
	}
	if o.StateDir != "" {
		dir, err := filepath.Abs(o.StateDir)
		if err != nil {
			return nil, fmt.Errorf("install %s: state directory: %w", key, err)
		}
		o.StateDir = dir
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultClient()
	}
	in := &installer{b: b, o: o, key: key, log: o.Log, limits: defaultLimits,
		os: normalizeOS(o.OS), arch: normalizeArch(o.Arch)}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	if in.os == "" {
		in.os = normalizeOS(runtime.GOOS)
	}
	if in.arch == "" {
		in.arch = normalizeArch(runtime.GOARCH)
	}
	return in, nil
}

// run installs under the bundle's lock: clean leftovers, check the platform, try each entry.
func (in *installer) run(ctx context.Context) (Result, error) {
	binRoot := filepath.Join(in.o.StateDir, "bin")
	if err := os.MkdirAll(binRoot, 0o755); err != nil {
		return Result{}, fmt.Errorf("install %s: %w: %w", in.key, ErrInstallFailed, err)
	}
	unlock, err := lockKey(ctx, binRoot, in.key)
	if err != nil {
		return Result{}, fmt.Errorf("install %s: %w: %w", in.key, ErrInstallFailed, err)
	}
	defer unlock()
	defer in.releaseReplaced()
	in.cleanLeftovers(binRoot)

	if req := in.b.CLI.Requires; req != nil {
		if reason := in.platformMismatch("requires.", req.OS, req.Arch); reason != "" {
			return Result{}, fmt.Errorf("install %s: %w: %s", in.key, ErrInstallFailed, reason)
		}
	}
	if len(in.b.CLI.Install) == 0 {
		return Result{}, fmt.Errorf("install %s: %w: the bundle declares no install entries", in.key, ErrInstallFailed)
	}
	if in.o.From < 0 || in.o.From >= len(in.b.CLI.Install) {
		return Result{}, fmt.Errorf("install %s: %w: no install entry %d (the bundle has %d)", in.key, ErrInstallFailed, in.o.From, len(in.b.CLI.Install))
	}
	var res Result
	var short *RequiresError // an entry refused for want of disk or memory
	for i := in.o.From; i < len(in.b.CLI.Install); i++ {
		e := in.b.CLI.Install[i]
		path, err := in.entry(ctx, e)
		if err == nil {
			res.Index, res.Method, res.BinPath = i, e.Method, path
			in.log.Info("installed", "bundle", in.key, "entry", i, "method", e.Method, "bin", path)
			return res, nil
		}
		errors.As(err, &short)
		skip := Skip{Index: i, Method: e.Method, Reason: err.Error()}
		if nr := (*NeedsRootError)(nil); errors.As(err, &nr) {
			nr.Index = i
			if in.o.HandOff {
				in.log.Info("install entry handed to the caller: it needs root", "bundle", in.key, "entry", i, "method", e.Method)
				return res, fmt.Errorf("install %s: %w", in.key, nr)
			}
			skip.NeedsRoot = nr.Tool
		}
		reason := skip.Reason
		res.Skipped = append(res.Skipped, skip)
		level := slog.LevelWarn // it was tried and failed
		if strings.HasPrefix(reason, "skipped: ") {
			level = slog.LevelInfo // it does not apply here
		}
		in.log.Log(ctx, level, "install entry not used", "bundle", in.key, "entry", i, "method", e.Method, "reason", reason)
		if ctx.Err() != nil {
			return res, fmt.Errorf("install %s: %w: interrupted during install[%d] (%s): %w", in.key, ErrInstallFailed, i, e.Method, ctx.Err())
		}
		if ce := (*ChecksumError)(nil); errors.As(err, &ce) {
			return res, fmt.Errorf("install %s: %w: install[%d] (%s): %w", in.key, ErrInstallFailed, i, e.Method, err)
		}
	}
	reasons := make([]string, len(res.Skipped))
	for i, s := range res.Skipped {
		reasons[i] = fmt.Sprintf("install[%d] (%s): %s", s.Index, s.Method, s.Reason)
	}
	if short != nil {
		return res, fmt.Errorf("install %s: %w: %w (no install entry succeeded: %s)", in.key, ErrInstallFailed, short, strings.Join(reasons, "; "))
	}
	return res, fmt.Errorf("install %s: %w: no install entry succeeded: %s", in.key, ErrInstallFailed, strings.Join(reasons, "; "))
}

// entry runs one install entry and returns the binary's path, or why the entry was skipped or failed.
func (in *installer) entry(ctx context.Context, e manifest.InstallMethod) (string, error) {
	switch {
	case e.Experimental:
		return "", fmt.Errorf("skipped: experimental entries are not run (AIP-29)")
	case !manifest.IsKnownMethod(e.Method):
		return "", fmt.Errorf("skipped: unknown install method %q", e.Method)
	}
	if reason := in.platformMismatch("", e.OS, e.Arch); reason != "" {
		return "", errors.New("skipped: " + reason)
	}
	if err := in.requires(e); err != nil {
		return "", err
	}
	switch e.Method {
	case manifest.MethodDownload:
		return in.download(ctx, e)
	case manifest.MethodCurl:
		return in.curl(ctx, e)
	case manifest.MethodVendored:
		return in.vendored(e)
	case manifest.MethodGo:
		return in.goInstall(ctx, e)
	default:
		return in.packageManager(ctx, e)
	}
}

// platformMismatch says why lists of OS and arch names (empty = any) exclude the runtime platform,
// or returns "".
func (in *installer) platformMismatch(field string, oses, arches []string) string {
	if len(oses) > 0 && !slices.ContainsFunc(oses, func(s string) bool { return normalizeOS(s) == in.os }) {
		return fmt.Sprintf("%sos %v does not include this platform's %s", field, oses, in.os)
	}
	if len(arches) > 0 && !slices.ContainsFunc(arches, func(s string) bool { return normalizeArch(s) == in.arch }) {
		return fmt.Sprintf("%sarch %v does not include this platform's %s", field, arches, in.arch)
	}
	return ""
}

// normalizeOS maps an OS name (AIP-29 or Go spelling, any case) to AIP-29's word.
func normalizeOS(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "macos" || s == "osx" {
		return "darwin"
	}
	return s
}

// normalizeArch maps an architecture name (AIP-29, Go or uname spelling, any case) to AIP-29's word.
func normalizeArch(s string) string {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case "amd64", "x86_64", "x86-64":
		return "x64"
	case "aarch64":
		return "arm64"
	case "386", "i386", "i686", "ia32":
		return "x86"
	}
	return s
}

// binName is the file name the bundle's bin gets in BinDir.
func (in *installer) binName() string {
	return filepath.Base(filepath.FromSlash(in.b.CLI.Bin))
}
