package manifest

import (
	"fmt"
	"maps"
	"slices"
)

// envRules reports every refused variable (RefusedEnv) a sandbox's env.pass or env.set names: a
// dynamic-loader variable is an error (sandbox-env-loader) wherever it appears; another refused
// variable is an error in env.set (sandbox-env-refused: the author believes the setting takes
// effect, and it never does) and a warning in env.pass (the host's value is simply not passed).
func envRules(c *collector, ptr string, e *Env) {
	if e == nil {
		return
	}
	for i, name := range e.Pass {
		envFinding(c, JoinPointer(ptr, "env", "pass", i), false, "env.pass", name, SeverityWarning)
	}
	for _, name := range slices.Sorted(maps.Keys(e.Set)) {
		envFinding(c, JoinPointer(ptr, "env", "set", name), true, "env.set", name, SeverityError)
	}
}

// envFinding reports name at ptr (the key's position when key is set) when RefusedEnv
// refuses it, with severity for a variable that is not a loader's; it reports whether it did.
func envFinding(c *collector, ptr string, key bool, where, name string, severity Severity) bool {
	why, loader, refused := RefusedEnv(name)
	if !refused {
		return false
	}
	rule, msg, hint := "sandbox-env-refused", fmt.Sprintf("%s names %s, which clihost never passes to a program: %s", where, name, why), refusedEnvHint
	if loader {
		rule, msg, hint, severity = "sandbox-env-loader", fmt.Sprintf("%s names %s, a dynamic-loader variable: %s", where, name, why), loaderEnvHint, SeverityError
	}
	if key {
		c.atKey(ptr, severity, rule, msg, hint)
	} else {
		c.at(ptr, severity, rule, msg, hint)
	}
	return true
}

const (
	loaderEnvHint  = "remove it: the CLI runs as installed; vendor a wrapper binary in the bundle if it really needs a library path"
	refusedEnvHint = "remove it: the sandbox drops it at run time; pass the setting as an argument (bin_args or the tool's argv) or a config file the CLI reads"
)
