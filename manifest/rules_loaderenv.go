package manifest

import (
	"fmt"
	"strings"
)

// loaderEnvPrefixes are the variables a dynamic loader (glibc, musl, macOS dyld) or libc itself
// reads to load code into a process: a bundle that passes or sets one runs code of its choosing
// inside every process of the CLI, under the CLI's identity, past the verified binary.
var loaderEnvPrefixes = []string{"LD_", "DYLD_"}

// loaderEnvNames are single variables with the same effect: GCONV_PATH (iconv modules), LOCPATH,
// NLSPATH and HOSTALIASES (files libc reads), MALLOC_… (glibc's allocator tunables) and
// GLIBC_TUNABLES.
var loaderEnvNames = map[string]bool{
	"GCONV_PATH": true, "GLIBC_TUNABLES": true, "LOCPATH": true, "NLSPATH": true, "HOSTALIASES": true,
	"MALLOC_CHECK_": true, "MALLOC_TRACE": true, "RESOLV_HOST_CONF": true, "RES_OPTIONS": true,
}

// IsLoaderEnv reports whether name is a dynamic-loader (or libc loading) variable.
func IsLoaderEnv(name string) bool {
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
