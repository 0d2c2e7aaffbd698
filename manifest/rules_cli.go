package manifest

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// linter applies the semantic rules to one bundle.
type linter struct {
	b    *Bundle
	c    *collector // CLI.md findings
	refs *collector // CLI.md findings about commands refs, made while loading tools (merged into c)
	opts LoadOptions
	cli  *CLI
	root string // the bundle folder on disk, symlinks resolved; "" when not on disk (bundlefiles.go)
	// runnerFile is the RUNNER.md the runner refers to, read before the tools load (runner.go).
	runnerFile *runnerFile
	// secrets collects the findings of auth.ref's SECRETS.md (secrets.go); they join the
	// bundle's once the tools are loaded, with the bind grants checked against them.
	secrets *collector
}

var (
	idPattern       = regexp.MustCompile(`^[a-z0-9][a-z0-9\-]{1,63}$`)
	semverPattern   = regexp.MustCompile(`^\d+\.\d+\.\d+(?:[-+][\w.\-]+)?$`)
	binPattern      = regexp.MustCompile(`^[A-Za-z0-9._\-/]+$`)
	sha256Pattern   = regexp.MustCompile(`^[a-f0-9]{64}$`)
	detectPattern   = regexp.MustCompile(`^exit_code:(\d+)$`)
	snakePattern    = regexp.MustCompile(`^[a-z][a-z0-9_]+$`)
	valuePlaceholer = regexp.MustCompile(`\$\{\s*value\s*\}`)
)

func (l *linter) cliRules() {
	cli, c := l.cli, l.c
	doc := l.c.doc
	if doc.Has("/id") {
		if !idPattern.MatchString(cli.ID) {
			c.at("/id", SeverityError, "cli-id", fmt.Sprintf("id %q is not 2-64 lowercase letters, digits and dashes starting with a letter or digit", cli.ID), "e.g. id: gh or id: google-cloud")
		} else if folder := path.Base(path.Dir(l.b.fsPath)); folder != cli.ID && folder != "." {
			c.at("/id", SeverityWarning, "cli-id-folder", fmt.Sprintf("the bundle folder is %q but id is %q", folder, cli.ID), "rename the folder to match the id (AIP-29: the folder name SHOULD match)")
		}
	}
	if doc.Has("/version") && !semverPattern.MatchString(cli.Version) {
		c.at("/version", SeverityError, "cli-version", fmt.Sprintf("version %q is not a semver version", cli.Version), "the manifest's own version, e.g. 1.0.0; quote it so YAML keeps it a string")
	}
	if doc.Has("/bin") && !binPattern.MatchString(cli.Bin) {
		c.at("/bin", SeverityError, "cli-bin", fmt.Sprintf("bin %q is not a single token", cli.Bin), "bin is the binary's name on PATH; put default arguments in bin_args")
	}
	l.runnerRules(l.runnerFile)
	l.cliFileRules()
	l.installRules()
	l.versionRules()
	l.setupRules()
	l.authRules()
	l.secretsRules()
	l.outputRules("/output", cli.Output)
	l.sandboxRules(l.c, "/sandbox", &cli.Sandbox)
	if doc.Has("/actions") && doc.Has("/intents") {
		c.atKey("/intents", SeverityError, "cli-actions-alias", "both actions and intents are declared", "they are the same list of INTENT.md refs (the schema's and the prose's name for it); keep one")
	}
}

func (l *linter) installRules() {
	for i, m := range l.cli.Install {
		ptr := JoinPointer("/install", i)
		if !IsKnownMethod(m.Method) {
			if m.Method != "" {
				l.c.at(ptr+"/method", SeverityWarning, "install-unknown-method", fmt.Sprintf("install method %q is unknown to this host and will be skipped%s", m.Method, didYouMean(nearest(m.Method, KnownMethods))), "known methods: "+strings.Join(KnownMethods, ", "))
			}
			continue
		}
		if m.Experimental {
			l.c.at(ptr+"/experimental", SeverityWarning, "install-experimental", fmt.Sprintf("install entry %d is experimental and will be skipped", i), "drop experimental: true once the method is supported")
		}
		if m.VerifySHA256 != "" && !sha256Pattern.MatchString(m.VerifySHA256) {
			l.c.at(ptr+"/verify_sha256", SeverityError, "install-sha256", fmt.Sprintf("verify_sha256 %q is not 64 lowercase hex digits", m.VerifySHA256), "write the file's SHA-256 as printed by sha256sum")
		}
		if (m.Method == MethodCurl || m.Method == MethodDownload) && m.VerifySHA256 == "" {
			l.c.atKey(ptr+"/method", SeverityWarning, "install-no-checksum", fmt.Sprintf("%s entry without verify_sha256: the download cannot be verified", m.Method), "add verify_sha256; clihost refuses unverified curl installers unless the operator passes --allow-unverified")
		}
		if m.Method == MethodVendored && m.Path != "" {
			l.vendoredRule(ptr+"/path", m.Path)
		}
	}
}

func (l *linter) vendoredRule(ptr, p string) {
	if path.IsAbs(p) || strings.HasPrefix(path.Clean(p), "..") {
		l.c.at(ptr, SeverityError, "install-vendored-path", fmt.Sprintf("vendored path %q leaves the bundle folder", p), "vendored binaries live inside the bundle, e.g. ./bin/tool")
		return
	}
	if !l.outside(l.c, ptr, "vendored binary", p) {
		return // nothing outside the bundle is looked at
	}
	full := path.Join(path.Dir(l.b.fsPath), p)
	st, err := fs.Stat(l.b.fsys, full)
	if err != nil {
		l.c.at(ptr, SeverityError, "install-vendored-missing", fmt.Sprintf("vendored binary %q does not exist", p), "the path is relative to the bundle folder")
		return
	}
	if !st.Mode().IsRegular() {
		l.c.at(ptr, SeverityError, "install-vendored-missing", fmt.Sprintf("vendored path %q is not a regular file", p), "point at the binary itself")
	}
}

// versionPatternErrors and versionRangeErrors remember, by their text, whether a version_check
// pattern compiles and a range parses (lint needs only that), so a reload does not compile them
// again.
var versionPatternErrors, versionRangeErrors errorCache

func compileVersionPatternError(p string) error {
	_, err := CompileVersionPattern(p)
	return err
}

func parseRangeError(r string) error {
	_, err := ParseRange(r)
	return err
}

// errorCache holds the outcome of a check that is a function of one string alone. It is dropped
// whole when it reaches errorCacheSize entries.
type errorCache struct {
	sync.Mutex
	m map[string]error
}

const errorCacheSize = 1024

// get returns check(text), from the cache when text was checked before.
func (ec *errorCache) get(text string, check func(string) error) error {
	ec.Lock()
	err, ok := ec.m[text]
	ec.Unlock()
	if ok {
		return err
	}
	err = check(text)
	ec.Lock()
	defer ec.Unlock()
	if ec.m == nil || len(ec.m) >= errorCacheSize {
		ec.m = map[string]error{}
	}
	ec.m[text] = err
	return err
}

func (ec *errorCache) reset() {
	ec.Lock()
	ec.m = nil
	ec.Unlock()
}

func (l *linter) versionRules() {
	vc := l.cli.VersionCheck
	doc := l.c.doc
	if doc.Has("/version_check/parse") {
		if err := versionPatternErrors.get(vc.Parse, compileVersionPatternError); err != nil {
			if err == errNoGroup {
				l.c.at("/version_check/parse", SeverityError, "version-regex-group", fmt.Sprintf("parse %q has no capture group", vc.Parse), "wrap the version in parentheses, e.g. 'gh version (\\S+)'")
			} else {
				l.c.at("/version_check/parse", SeverityError, "version-regex", fmt.Sprintf("parse %q %v (tried Go RE2 and ECMAScript)", vc.Parse, err), "write an RE2-compatible pattern with one capture group")
			}
		}
	}
	if doc.Has("/version_check/range") {
		if err := versionRangeErrors.get(vc.Range, parseRangeError); err != nil {
			l.c.at("/version_check/range", SeverityError, "version-range", err.Error(), "write an npm range such as '>=2.40 <3', '^1.6' or '1.x || 2.x'")
		}
	}
	if doc.Has("/version_check/cmd") && l.cli.Bin != "" {
		if words := strings.Fields(vc.Cmd); len(words) == 0 || path.Base(words[0]) != path.Base(l.cli.Bin) {
			l.c.at("/version_check/cmd", SeverityWarning, "version-cmd-bin", fmt.Sprintf("version_check.cmd %q does not run bin %q", vc.Cmd, l.cli.Bin), "the check should ask the installed binary, e.g. '"+l.cli.Bin+" --version'")
		}
	}
}

func (l *linter) setupRules() {
	seen := map[string]int{}
	for i, s := range l.cli.Setup {
		ptr := JoinPointer("/setup", i)
		if s.ID != "" {
			if first, dup := seen[s.ID]; dup {
				l.c.at(ptr+"/id", SeverityError, "setup-step-id-duplicate", fmt.Sprintf("setup step id %q is already used by step %d", s.ID, first), "step ids key the setup ledger; make each unique")
			} else {
				seen[s.ID] = i
			}
		}
		if s.Persist != nil {
			n := 0
			for _, v := range []string{s.Persist.Env, s.Persist.SecretSlug, s.Persist.Cmd} {
				if v != "" {
					n++
				}
			}
			if n != 1 {
				l.c.atKey(ptr+"/persist", SeverityError, "setup-persist", fmt.Sprintf("persist declares %d of env, secret_slug and cmd; exactly one is required", n), "pick where the value goes: env: NAME, secret_slug: slug or cmd: \"tool config set k ${value}\"")
			}
			envFinding(l.c, ptr+"/persist/env", false, "persist.env", s.Persist.Env, SeverityError)
		}
		for _, field := range []struct{ name, val string }{{"cmd", s.Cmd}, {"url", s.URL}, {"prompt", s.Prompt}} {
			if valuePlaceholer.MatchString(field.val) {
				l.c.at(ptr+"/"+field.name, SeverityError, "setup-value-placement", fmt.Sprintf("${value} is used in %s; it exists only in persist.cmd", field.name), "move the command that consumes the value to persist.cmd")
			}
		}
		l.oauthStepRule(ptr, s)
		if s.SkipIf != nil && valuePlaceholer.MatchString(s.SkipIf.Cmd) {
			l.c.at(ptr+"/skip_if/cmd", SeverityError, "setup-value-placement", "${value} is used in skip_if.cmd; it exists only in persist.cmd", "skip_if runs before the value is known")
		}
	}
}

// oauthStepRule checks an oauth step's flow: without one the host can only take a token given with
// --value; an unusable one fails the step.
func (l *linter) oauthStepRule(ptr string, s SetupStep) {
	switch {
	case s.Kind != StepOAuth:
	case s.OAuth == nil:
		l.c.at(ptr, SeverityWarning, "setup-oauth-flow", fmt.Sprintf("oauth step %q declares no flow: the host cannot obtain the token, only store one given with --value %s=TOKEN", s.ID, s.ID), "add oauth: {flow, client_id, authorization_url or device_authorization_url, token_url, scopes}")
	default:
		if err := s.OAuth.Check(); err != nil {
			l.c.at(ptr+"/oauth", SeverityError, "setup-oauth-flow", err.Error(), "endpoints are https URLs (plain http only to a loopback address); the host sets redirect_uri, state and the PKCE challenge itself")
		}
	}
}

func (l *linter) authRules() {
	a := l.cli.Auth
	if a == nil {
		return
	}
	if a.Refresh != nil && l.c.doc.Has("/auth/refresh/every") {
		if _, err := ParseISODuration(a.Refresh.Every); err != nil {
			l.c.at("/auth/refresh/every", SeverityError, "auth-every", err.Error(), "e.g. PT24H (a day), PT30M, P7D")
		}
	}
	if a.Expiry != nil && l.c.doc.Has("/auth/expiry/detect") && !detectPattern.MatchString(a.Expiry.Detect) {
		l.c.at("/auth/expiry/detect", SeverityError, "auth-expiry-detect", fmt.Sprintf("expiry.detect %q is not exit_code:N", a.Expiry.Detect), "e.g. exit_code:4, the code the CLI exits with when its login expired")
	}
}

// outputRules checks an output block's exit codes; ptr is where the block lives.
func (l *linter) outputRules(ptr string, o *Output) {
	if o == nil {
		return
	}
	l.exitCodeRules(l.c, ptr+"/exit_codes", o.ExitCodes)
}

func (l *linter) exitCodeRules(c *collector, ptr string, codes map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(codes)) {
		p := JoinPointer(ptr, k)
		if n, err := strconv.Atoi(k); err != nil || n < 0 || n > 255 {
			c.atKey(p, SeverityError, "output-exit-code-key", fmt.Sprintf("exit code %q is not an integer from 0 to 255", k), "keys are the numeric exit codes, e.g. 4: auth_required")
		}
		if !snakePattern.MatchString(codes[k]) {
			c.at(p, SeverityError, "output-exit-code-name", fmt.Sprintf("exit code name %q is not snake_case", codes[k]), "e.g. auth_required, not_found, usage_error")
		}
	}
}

// sandboxRules checks a sandbox block's patterns and hosts.
func (l *linter) sandboxRules(c *collector, ptr string, s *Sandbox) {
	if s == nil {
		return
	}
	envRules(c, ptr, s.Env)
	if s.Network != nil {
		for i, h := range s.Network.Egress {
			if err := CheckEgressHost(h); err != nil {
				c.at(JoinPointer(ptr, "network", "egress", i), SeverityError, "sandbox-egress", err.Error(), "list hostnames (api.github.com) or *. globs (*.githubusercontent.com)")
			}
		}
	}
	if s.FS != nil {
		for _, list := range []struct {
			name  string
			globs []string
		}{{"read", s.FS.Read}, {"write", s.FS.Write}, {"deny", s.FS.Deny}} {
			for i, g := range list.globs {
				p := JoinPointer(ptr, "fs", list.name, i)
				kind, err := ClassifyPattern(g)
				switch {
				case err != nil:
					c.at(p, SeverityError, "sandbox-glob", err.Error(), "patterns are absolute, ~/-relative or workspace-relative globs")
				case kind == PatternUnanchored && list.name != "deny":
					c.at(p, SeverityError, "sandbox-glob-unenforceable", fmt.Sprintf("fs.%s %q cannot be enforced: ** or a wildcard before the last path component", list.name, g),
						"allow lists take a path, a subtree (dir/**) or a wildcard in the last component; e.g. ./** for the workspace, .git/** for its repository")
				}
			}
		}
	}
}
