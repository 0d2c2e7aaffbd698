package sandbox

import (
	"maps"
	"slices"
	"strings"

	"github.com/clihost/clihost/manifest"
)

// defaultEnv is added by Env unless the variable is already present: it asks CLIs for plain,
// non-interactive output.
var defaultEnv = [][2]string{{"TERM", "dumb"}, {"NO_COLOR", "1"}, {"CI", "true"}}

// Env builds an environment from nothing: each name in pass is copied from lookup (os.LookupEnv in
// production; nil passes nothing) when set there; then set is applied, overriding passed values;
// then TERM=dumb, NO_COLOR=1 and CI=true are added unless already present. The result is sorted by
// name, KEY=VALUE. refused lists, sorted and without duplicates, the names Env would not pass or set,
// so the caller can report them: names that cannot be variables (empty, or containing '=' or NUL),
// set values containing NUL, and the variables manifest.RefusedEnv refuses.
//
// Those are clihost's one list of refused variables, kept in package manifest with the reason for
// each so that lint reports a manifest naming one (sandbox-env-loader, sandbox-env-refused): some
// variables make a program load or run code, or read or write files, of the setter's choosing
// rather than configure it. Through a manifest's env.pass or env.set they would turn any bundled
// CLI, or anything it spawns, into a code-execution primitive, so they are never passed or set,
// whatever the manifest says (names are compared case-insensitively). The list holds the dynamic
// loader's and libc's variables (LD_*, DYLD_*, GCONV_PATH, GLIBC_TUNABLES, …), the shells' startup
// files and imported functions (BASH_ENV, ENV, BASH_FUNC_*, …), the interpreters' module paths and
// extra options (PYTHONPATH, NODE_OPTIONS, JAVA_TOOL_OPTIONS, …) and git's configuration from the
// environment (GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT, GIT_CONFIG_KEY_*, GIT_CONFIG_VALUE_*).
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
	_, _, refused := manifest.RefusedEnv(name)
	return !refused
}
