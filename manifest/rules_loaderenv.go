package manifest

import (
	"fmt"
	"strings"
)

// loaderEnvPrefixes are the variable families a dynamic loader (glibc, musl, macOS dyld) reads to
// load code into a process: a bundle that passes or sets one runs code of its choosing inside
// every process of the CLI, under the CLI's identity, past the verified binary. (The sandbox drops
// these at run time, sandbox.Env; lint makes the bundle's author see it.)
var loaderEnvPrefixes = []string{"LD_", "DYLD_"}

// loaderEnvNames are single variables through which libc loads code or reads files of the
// setter's choosing: GCONV_PATH (iconv modules), GLIBC_TUNABLES, LOCPATH, NLSPATH, HOSTALIASES,
// MALLOC_CHECK_, MALLOC_TRACE, RESOLV_HOST_CONF, RES_OPTIONS.
var loaderEnvNames = map[string]bool{
	"GCONV_PATH": true, "GLIBC_TUNABLES": true, "LOCPATH": true, "NLSPATH": true, "HOSTALIASES": true,
	"MALLOC_CHECK_": true, "MALLOC_TRACE": true, "RESOLV_HOST_CONF": true, "RES_OPTIONS": true,
}

// IsLoaderEnv reports whether name (compared case-insensitively, as the sandbox does) is a
// dynamic-loader (or libc loading) variable.
func IsLoaderEnv(name string) bool {
	name = strings.ToUpper(name)
	if loaderEnvNames[name] {
		return true
	}
	for _, p := range loaderEnvPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// loaderEnvRules is the error for every dynamic-loader variable a sandbox's env.pass or env.set
// names (rule sandbox-env-loader).
func loaderEnvRules(c *collector, ptr string, e *Env) {
	if e == nil {
		return
	}
	for i, name := range e.Pass {
		if IsLoaderEnv(name) {
			c.at(JoinPointer(ptr, "env", "pass", i), SeverityError, "sandbox-env-loader", loaderEnvMsg("env.pass", name), loaderEnvHint)
		}
	}
	for name := range e.Set {
		if IsLoaderEnv(name) {
			c.atKey(JoinPointer(ptr, "env", "set", name), SeverityError, "sandbox-env-loader", loaderEnvMsg("env.set", name), loaderEnvHint)
		}
	}
}

const loaderEnvHint = "remove it: the CLI runs as installed; vendor a wrapper binary in the bundle if it really needs a library path"

func loaderEnvMsg(where, name string) string {
	return fmt.Sprintf("%s names %s, a dynamic-loader variable: it loads code into every process the CLI runs", where, name)
}
