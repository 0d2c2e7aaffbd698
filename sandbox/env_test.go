package sandbox_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/clihost/clihost/sandbox"
)

func TestEnv(t *testing.T) {
	host := map[string]string{
		"HOME": "/home/u", "GH_TOKEN": "t", "LD_PRELOAD": "/evil.so", "NOT_PASSED": "x", "TERM": "xterm",
	}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }

	env, refused := sandbox.Env(lookup,
		[]string{"HOME", "GH_TOKEN", "LD_PRELOAD", "UNSET_VAR", "ld_library_path"},
		map[string]string{
			"GH_TOKEN": "override", "PAGER": "cat", "NODE_OPTIONS": "--require /evil.js",
			"GIT_CONFIG_KEY_0": "core.fsmonitor", "BASH_FUNC_git%%": "() { evil; }", "A=B": "c", "NUL": "a\x00b",
			"NO_COLOR": "0",
		})
	wantEnv := []string{"CI=true", "GH_TOKEN=override", "HOME=/home/u", "NO_COLOR=0", "PAGER=cat", "TERM=dumb"}
	wantRefused := []string{"A=B", "BASH_FUNC_git%%", "GIT_CONFIG_KEY_0", "LD_PRELOAD", "NODE_OPTIONS", "NUL", "ld_library_path"}
	if !slices.Equal(env, wantEnv) {
		t.Errorf("env %q, want %q", env, wantEnv)
	}
	if !slices.Equal(refused, wantRefused) {
		t.Errorf("refused %q, want %q", refused, wantRefused)
	}

	for _, name := range []string{
		"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "GCONV_PATH", "BASH_ENV", "ENV",
		"PYTHONSTARTUP", "PYTHONPATH", "PERL5OPT", "PERL5LIB", "RUBYOPT", "NODE_OPTIONS",
		"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
		// libc's, which lint called loader variables while Env passed them (one list since).
		"GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "HOSTALIASES", "MALLOC_CHECK_", "MALLOC_TRACE", "RESOLV_HOST_CONF", "RES_OPTIONS",
	} {
		env, refused := sandbox.Env(func(string) (string, bool) { return "x", true }, []string{name}, map[string]string{name: "x"})
		if !slices.Equal(refused, []string{name}) || slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }) {
			t.Errorf("%s: env %q refused %q", name, env, refused)
		}
	}

	env, refused = sandbox.Env(nil, []string{"HOME"}, map[string]string{"TERM": "vt100", "CI": "false"})
	if want := []string{"CI=false", "NO_COLOR=1", "TERM=vt100"}; !slices.Equal(env, want) || refused != nil {
		t.Errorf("defaults: env %q refused %q, want %q", env, refused, want)
	}
}
