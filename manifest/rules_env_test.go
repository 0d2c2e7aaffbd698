package manifest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRefusedEnvFindings: every variable the sandbox drops is reported wherever a manifest names
// it. A loader variable is an error in env.pass and env.set (sandbox-env-loader); another refused
// variable is an error in env.set, a step's env and a setup step's persist.env, which never take
// effect (sandbox-env-refused), and a warning in env.pass, whose value is simply not passed. Before
// there was one list, GLIBC_TUNABLES was a lint error but passed at run time, and BASH_ENV,
// PYTHONPATH, NODE_OPTIONS and GIT_CONFIG_* were dropped at run time while lint said nothing.
func TestRefusedEnvFindings(t *testing.T) {
	const cliEnv = `env: { pass: [HOME, DEMO_TOKEN], set: { DEMO_COLOR: "0" } }`
	for _, c := range []struct {
		name  string
		edits []edit
		want  []string // severity rule line-marker
	}{
		{"cli set git config", []edit{{cliFile, cliEnv, "env:\n    pass: [HOME]\n    set:\n      GIT_CONFIG_COUNT: \"1\"\n      GIT_CONFIG_KEY_0: core.hooksPath\n      git_config_value_0: /dev/null"}},
			[]string{"error sandbox-env-refused GIT_CONFIG_COUNT", "error sandbox-env-refused GIT_CONFIG_KEY_0", "error sandbox-env-refused git_config_value_0"}},
		{"cli pass interpreters", []edit{{cliFile, cliEnv, "env: { pass: [HOME, PYTHONPATH, node_options, BASH_ENV] }"}},
			[]string{"warning sandbox-env-refused PYTHONPATH", "warning sandbox-env-refused node_options", "warning sandbox-env-refused BASH_ENV"}},
		{"cli libc", []edit{{cliFile, cliEnv, "env: { pass: [HOME, GLIBC_TUNABLES, LOCPATH], set: { NLSPATH: x, HOSTALIASES: y, MALLOC_TRACE: z, RES_OPTIONS: w } }"}},
			[]string{"error sandbox-env-loader GLIBC_TUNABLES", "error sandbox-env-loader LOCPATH", "error sandbox-env-loader HOSTALIASES",
				"error sandbox-env-loader MALLOC_TRACE", "error sandbox-env-loader NLSPATH", "error sandbox-env-loader RES_OPTIONS"}},
		{"tool sandbox", []edit{{toolFile, "sandbox:\n  fs: { write: [] }", "sandbox:\n  fs: { write: [] }\n  env: { pass: [LD_PRELOAD, JAVA_TOOL_OPTIONS], set: { PERL5OPT: -Mx, PAGER: cat } }"}},
			[]string{"error sandbox-env-loader LD_PRELOAD", "warning sandbox-env-refused JAVA_TOOL_OPTIONS", "error sandbox-env-refused PERL5OPT"}},
		{"step env", stepsEdits(`    - { argv: [item, list, "--", "${input.query}"], env: { BASH_ENV: x, Q: y } }` + "\n"),
			[]string{"error sandbox-env-refused BASH_ENV"}},
		{"persist env", []edit{{cliFile, "persist: { secret_slug: demo/token }", "persist: { env: PYTHONSTARTUP }"}},
			[]string{"error sandbox-env-refused PYTHONSTARTUP"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := LoadBundle(buildBundle(t, c.edits, nil), cliFile, LoadOptions{})
			var got []string
			var env Findings
			for _, f := range b.Findings {
				if f.Rule == "tool-sandbox-widens" { // a tool's env must be the bundle's too
					continue
				}
				env = append(env, f)
				for _, w := range c.want {
					if strings.HasSuffix(w, " "+nameIn(f.Message)) {
						got = append(got, fmt.Sprintf("%s %s %s", f.Severity, f.Rule, nameIn(f.Message)))
					}
				}
				if f.Rule != "sandbox-env-refused" && f.Rule != "sandbox-env-loader" {
					t.Errorf("unexpected finding %s", f)
				} else if f.Hint == "" || !strings.Contains(f.Message, ": ") {
					t.Errorf("finding without its reason or hint: %s", f)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(c.want))
			if !slices.Equal(got, want) || len(env) != len(want) {
				t.Fatalf("findings %q, want %q\n%s", got, want, findingsText(b.Findings))
			}
		})
	}
}

// nameIn is the variable a refused-env finding's message names ("env.set names X, …").
func nameIn(msg string) string {
	_, rest, _ := strings.Cut(msg, " names ")
	name, _, _ := strings.Cut(rest, ",")
	return name
}

// TestRefusedEnvList: the list matches names case-insensitively, families by prefix, and leaves
// look-alikes alone.
func TestRefusedEnvList(t *testing.T) {
	for name, loader := range map[string]bool{
		"LD_PRELOAD": true, "ld_audit": true, "DYLD_INSERT_LIBRARIES": true, "GLIBC_TUNABLES": true, "MALLOC_CHECK_": true,
		"BASH_ENV": false, "ENV": false, "BASH_FUNC_x%%": false, "GIT_CONFIG_KEY_12": false, "GIT_CONFIG_PARAMETERS": false, "_JAVA_OPTIONS": false,
	} {
		why, l, refused := RefusedEnv(name)
		if !refused || l != loader || why == "" {
			t.Errorf("%s: refused %v loader %v why %q", name, refused, l, why)
		}
	}
	for _, name := range []string{"", "HOME", "PATH", "LDFLAGS", "ENVIRONMENT", "GIT_CONFIG_GLOBAL_X", "MALLOC_CHECK", "PYTHONIOENCODING", "GIT_CONFIG"} {
		if _, _, refused := RefusedEnv(name); refused {
			t.Errorf("%s refused", name)
		}
	}
}

// TestRefusedEnvInProcessCode: the variables that make an allowed program itself load or run code
// of the setter's choosing — no exec of another program, which exec.allow and Landlock would
// govern — are refused, siblings of the listed ones included: the JVM launcher's other options
// variable, Lua's startup code and module paths, python's user site (its .pth files run at
// startup), PHP's ini files (auto_prepend_file), OpenSSL's configuration (it loads engines and
// providers, shared objects, into every program linked with it: curl, git, python), zsh's startup
// folder, .NET's startup hooks and profilers, vi's startup commands, and git's configuration
// files named from the environment (core.fsmonitor, outside the workspace's git check). A secret
// may not be bound to any of them either.
func TestRefusedEnvInProcessCode(t *testing.T) {
	for _, name := range []string{"JDK_JAVA_OPTIONS", "LUA_INIT", "LUA_INIT_5_4", "LUA_PATH", "LUA_PATH_5_3", "LUA_CPATH", "LUA_CPATH_5_4",
		"PYTHONUSERBASE", "PHPRC", "PHP_INI_SCAN_DIR", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES", "ZDOTDIR",
		"DOTNET_STARTUP_HOOKS", "CORECLR_PROFILER_PATH", "CORECLR_PROFILER_PATH_64", "EXINIT", "VIMINIT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"} {
		if why, _, refused := RefusedEnv(name); !refused || why == "" {
			t.Errorf("%s is not refused", name)
		}
		if ReservedSecretEnv(name) == "" {
			t.Errorf("a secret may be bound to %s", name)
		}
	}
}
