package sandbox

import "regexp"

// runConfig is a file, other than git's, that a tool the owner runs in a directory reads there and
// that can name a program for it to run: a write there would run code on the host at the owner's
// next, unsuspecting command (yarn, npm, cargo, rustup, mise, pre-commit via git commit, hg). The
// git check records each one anywhere in a writable root and quarantines one the call created or
// changed when risky says its content names a program.
type runConfig struct {
	// parent, when set, is the name the directory holding the file must have (".cargo").
	parent, name string
	// tool is who runs what the file names, for the warning.
	tool  string
	risky func([]byte) bool
}

// always: any content can name a program (a pre-commit hook, a mise hook or task, an hg hook).
func always([]byte) bool { return true }

// matches returns a risky function true when re matches the content.
func matches(re string) func([]byte) bool {
	r := regexp.MustCompile(re)
	return r.Match
}

// cargoRisky: the keys of a cargo config that name a program cargo runs, and [env], which sets
// the environment (LD_PRELOAD …) of the programs it runs.
var cargoRisky = matches(`(?m)(^|[\s.{,"'])(runner|rustc-wrapper|rustc-workspace-wrapper|rustc|rustdoc|linker|ar|credential-provider|global-credential-providers)["']?\s*=|^\s*\[\s*env\s*\]|(^|[\s{,])env\s*[.=]`)

// runConfigs are the files the check judges. direnv's .envrc is not among them: direnv runs one
// only once the owner has allowed that exact content (its allow list is keyed by a hash of the
// path and the content), so a changed .envrc is refused until allowed again.
var runConfigs = []runConfig{
	{name: ".pre-commit-config.yaml", tool: "pre-commit (the git hook that runs it on commit)", risky: always},
	{name: ".pre-commit-config.yml", tool: "pre-commit (the git hook that runs it on commit)", risky: always},
	{name: ".yarnrc.yml", tool: "yarn", risky: matches(`(?m)^\s*["']?(yarnPath|plugins)["']?\s*:`)},
	{name: ".yarnrc", tool: "yarn 1", risky: matches(`(?m)^\s*["']?yarn-path`)},
	{name: ".npmrc", tool: "npm and pnpm", risky: matches(`(?m)^\s*(script[-_]shell|node[-_]options|shell|git|editor|browser|viewer|onload[-_]script|init[-_]module|globalconfig|userconfig|prefix|shell[-_]emulator)\s*=`)},
	{name: "rust-toolchain", tool: "rustup", risky: matches(`(?m)^\s*path\s*=`)},
	{name: "rust-toolchain.toml", tool: "rustup", risky: matches(`(?m)^\s*path\s*=`)},
	{parent: ".cargo", name: "config", tool: "cargo", risky: cargoRisky},
	{parent: ".cargo", name: "config.toml", tool: "cargo", risky: cargoRisky},
	{name: "mise.toml", tool: "mise", risky: always},
	{name: ".mise.toml", tool: "mise", risky: always},
	{name: "mise.local.toml", tool: "mise", risky: always},
	{name: ".mise.local.toml", tool: "mise", risky: always},
	{parent: ".config", name: "mise.toml", tool: "mise", risky: always},
	{parent: ".hg", name: "hgrc", tool: "Mercurial", risky: always},
}

// runConfigNames are the names in runConfigs, for a quick test of every entry the walk meets.
var runConfigNames = func() map[string]bool {
	m := map[string]bool{}
	for _, rc := range runConfigs {
		m[rc.name] = true
	}
	return m
}()

// runConfigFor returns the runConfig of name in a directory called parent, or nil.
func runConfigFor(parent, name string) *runConfig {
	if !runConfigNames[name] {
		return nil
	}
	for i := range runConfigs {
		if rc := &runConfigs[i]; rc.name == name && (rc.parent == "" || rc.parent == parent) {
			return rc
		}
	}
	return nil
}
