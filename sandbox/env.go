package sandbox

import (
	"maps"
	"slices"
	"strings"
)

// defaultEnv is added by Env unless the variable is already present: it asks CLIs for plain,
// non-interactive output.
var defaultEnv = [][2]string{{"TERM", "dumb"}, {"NO_COLOR", "1"}, {"CI", "true"}}

// refusedNames and refusedPrefixes (compared upper-cased) are the variables Env refuses; its doc
// comment says why each is there.
var (
	refusedNames = []string{
		"GCONV_PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4",
		"PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PERL5OPT", "PERL5LIB", "PERLLIB",
		"RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
		"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
	}
	refusedPrefixes = []string{"LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"}
)

// Env builds an environment from nothing: each name in pass is copied from lookup (os.LookupEnv in
// production; nil passes nothing) when set there; then set is applied, overriding passed values;
// then TERM=dumb, NO_COLOR=1 and CI=true are added unless already present. The result is sorted by
// name, KEY=VALUE. refused lists, sorted and without duplicates, the names Env would not pass or set,
// so the caller can report them: names that cannot be variables (empty, or containing '=' or NUL),
// set values containing NUL, and the variables below.
//
// Some variables make a program load or run code of the setter's choosing rather than configure it.
// Through a manifest's env.pass or env.set they would turn any bundled CLI, or anything it spawns,
// into a code-execution primitive, so they are never passed or set, whatever the manifest says
// (names are compared case-insensitively):
//
//   - LD_* (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, …): the ELF dynamic loader maps the named
//     libraries into every dynamically linked program. DYLD_*: the same for macOS dyld.
//   - GCONV_PATH: glibc's iconv loads charset-conversion modules (shared objects) from it.
//   - BASH_ENV: bash sources this file before running any non-interactive script. ENV: sh (POSIX,
//     dash) and bash in sh mode source it at startup. BASH_FUNC_*: bash imports exported functions
//     from these, overriding any command a script calls. SHELLOPTS, BASHOPTS, PS4: turning on
//     xtrace from the environment makes bash expand PS4, command substitutions included, before
//     every command.
//   - PYTHONSTARTUP: run by an interactive python. PYTHONPATH, PYTHONHOME: where python imports its
//     modules and standard library from, so any import runs the setter's code.
//   - PERL5OPT: extra perl switches, such as -M to load a module. PERL5LIB, PERLLIB: module paths.
//   - RUBYOPT: extra ruby switches, such as -r to require a file. RUBYLIB: library path.
//   - NODE_OPTIONS: extra node switches, such as --require or --import.
//   - JAVA_TOOL_OPTIONS, _JAVA_OPTIONS: extra JVM options, such as -javaagent.
//   - GIT_CONFIG_PARAMETERS, and its successor GIT_CONFIG_COUNT with GIT_CONFIG_KEY_<n> and
//     GIT_CONFIG_VALUE_<n>: git configuration from the environment, which can name programs git
//     runs (core.sshCommand, core.fsmonitor, alias.*, …).
func Env(lookup func(string) (string, bool), pass []string, set map[string]string) (env []string, refused []string) {
	vars := map[string]string{}
	for _, name := range pass {
		if !allowed(name) {
			refused = append(refused, name)
			continue
		}
		if lookup == nil {
			continue
		}
		if v, ok := lookup(name); ok {
			vars[name] = v
		}
	}
	for name, v := range set {
		if !allowed(name) || strings.ContainsRune(v, 0) {
			refused = append(refused, name)
			continue
		}
		vars[name] = v
	}
	for _, kv := range defaultEnv {
		if _, ok := vars[kv[0]]; !ok {
			vars[kv[0]] = kv[1]
		}
	}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, name+"="+vars[name])
	}
	slices.Sort(refused)
	return env, slices.Compact(refused)
}

// allowed reports whether name may be passed to or set for a child.
func allowed(name string) bool {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return false
	}
	upper := strings.ToUpper(name)
	if slices.Contains(refusedNames, upper) {
		return false
	}
	for _, p := range refusedPrefixes {
		if strings.HasPrefix(upper, p) {
			return false
		}
	}
	return true
}
