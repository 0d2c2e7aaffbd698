package manifest

import "strings"

// refusedVar is one entry of refusedEnv: a variable name, or a family of names when prefix is
// set, that clihost never passes to or sets for a program.
type refusedVar struct {
	name   string // upper case
	prefix bool   // name is a prefix: every variable starting with it
	loader bool   // read by the dynamic loader or libc in every dynamically linked program
	why    string // what the variable makes a program do
}

// refusedEnv is clihost's one list of refused environment variables: sandbox.Env drops them from
// every process clihost starts, whatever a manifest says, and lint reports a manifest that names
// one (sandbox-env-loader for the loader's own, sandbox-env-refused for the rest). Each makes a
// program load or run code, or read or write files, of the setter's choosing rather than
// configure it:
// through a manifest's env.pass or env.set it would turn any bundled CLI, or anything it spawns,
// into a code-execution primitive.
var refusedEnv = []refusedVar{
	{name: "LD_", prefix: true, loader: true, why: "the ELF dynamic loader maps the libraries it names (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, …) into every dynamically linked program"},
	{name: "DYLD_", prefix: true, loader: true, why: "macOS dyld maps the libraries it names into every program"},
	{name: "GCONV_PATH", loader: true, why: "glibc's iconv loads charset-conversion modules (shared objects) from it"},
	{name: "GLIBC_TUNABLES", loader: true, why: "glibc's loader parses it in every program, set-user-ID ones included (CVE-2023-4911)"},
	{name: "LOCPATH", loader: true, why: "glibc loads locale data from it"},
	{name: "NLSPATH", loader: true, why: "glibc's catopen loads message catalogs from it"},
	{name: "HOSTALIASES", loader: true, why: "glibc's resolver reads host aliases from the file it names"},
	{name: "MALLOC_CHECK_", loader: true, why: "glibc's malloc changes how it checks the heap and what it does on corruption"},
	{name: "MALLOC_TRACE", loader: true, why: "glibc's mtrace writes to the file it names"},
	{name: "RESOLV_HOST_CONF", loader: true, why: "glibc's resolver reads its host configuration from the file it names"},
	{name: "RES_OPTIONS", loader: true, why: "glibc's resolver takes options from it, overriding resolv.conf"},
	{name: "BASH_ENV", why: "bash sources the file it names before running any non-interactive script"},
	{name: "ENV", why: "sh (POSIX, dash) and bash in sh mode source the file it names at startup"},
	{name: "BASH_FUNC_", prefix: true, why: "bash imports exported functions from these, overriding any command a script calls"},
	{name: "SHELLOPTS", why: "turning on xtrace from the environment makes bash expand PS4, command substitutions included, before every command"},
	{name: "BASHOPTS", why: "bash takes shell options from it at startup"},
	{name: "PS4", why: "bash expands it, command substitutions included, before every command under xtrace"},
	{name: "PYTHONSTARTUP", why: "an interactive python runs the file it names"},
	{name: "PYTHONPATH", why: "python imports modules from it, so any import runs the setter's code"},
	{name: "PYTHONHOME", why: "python loads its standard library from it"},
	{name: "PERL5OPT", why: "extra perl switches, such as -M to load a module"},
	{name: "PERL5LIB", why: "perl loads modules from it"},
	{name: "PERLLIB", why: "perl loads modules from it"},
	{name: "RUBYOPT", why: "extra ruby switches, such as -r to require a file"},
	{name: "RUBYLIB", why: "ruby loads libraries from it"},
	{name: "NODE_OPTIONS", why: "extra node switches, such as --require or --import"},
	{name: "JAVA_TOOL_OPTIONS", why: "extra JVM options, such as -javaagent"},
	{name: "_JAVA_OPTIONS", why: "extra JVM options, such as -javaagent"},
	{name: "JDK_JAVA_OPTIONS", why: "extra options of the java launcher (JDK 9 and later), such as -javaagent"},
	{name: "LUA_INIT", prefix: true, why: "lua runs the code it holds (or the file it names with @) before anything else"},
	{name: "LUA_PATH", prefix: true, why: "lua loads modules from it"},
	{name: "LUA_CPATH", prefix: true, why: "lua loads C modules (shared objects) from it"},
	{name: "PYTHONUSERBASE", why: "python runs the .pth files of the user site-packages under it at startup"},
	{name: "PHPRC", why: "php reads its ini file from it, and auto_prepend_file there runs code before every script"},
	{name: "PHP_INI_SCAN_DIR", why: "php reads extra ini files from it, and auto_prepend_file there runs code before every script"},
	{name: "OPENSSL_CONF", why: "OpenSSL reads its configuration from the file it names, which loads engines and providers (shared objects) into every program linked with it: curl, git, python"},
	{name: "OPENSSL_ENGINES", why: "OpenSSL loads engines (shared objects) from it"},
	{name: "OPENSSL_MODULES", why: "OpenSSL loads providers (shared objects) from it"},
	{name: "ZDOTDIR", why: "zsh sources .zshenv from it in every shell, scripts included"},
	{name: "DOTNET_STARTUP_HOOKS", why: ".NET runs the startup hooks (assemblies) it names in every program"},
	{name: "CORECLR_PROFILER_PATH", prefix: true, why: ".NET loads the profiler (a shared object) it names"},
	{name: "EXINIT", why: "vi and ex run the commands it holds at startup"},
	{name: "VIMINIT", why: "vim runs the commands it holds at startup"},
	{name: "GIT_CONFIG_GLOBAL", why: "git reads its global configuration from the file it names, which can name programs git runs (core.fsmonitor, core.sshCommand, …), outside clihost's git check"},
	{name: "GIT_CONFIG_SYSTEM", why: "git reads its system configuration from the file it names, which can name programs git runs (core.fsmonitor, core.sshCommand, …), outside clihost's git check"},
	{name: "GIT_CONFIG_PARAMETERS", why: "git configuration from the environment, which can name programs git runs (core.sshCommand, core.fsmonitor, alias.*, …); clihost sets git's safe.directory through it itself"},
	{name: "GIT_CONFIG_COUNT", why: "git configuration from the environment, which can name programs git runs (core.sshCommand, core.fsmonitor, alias.*, …); clihost sets git's safe.directory through it itself"},
	{name: "GIT_CONFIG_KEY_", prefix: true, why: "git configuration from the environment (with GIT_CONFIG_COUNT), which can name programs git runs"},
	{name: "GIT_CONFIG_VALUE_", prefix: true, why: "git configuration from the environment (with GIT_CONFIG_COUNT), which can name programs git runs"},
}

// RefusedEnv reports whether clihost refuses the variable name (compared case-insensitively):
// why says what the variable would make a program do, and loader whether the dynamic loader or
// libc reads it in every program. sandbox.Env never passes or sets such a variable; lint reports
// a manifest that names one.
func RefusedEnv(name string) (why string, loader, refused bool) {
	upper := strings.ToUpper(name)
	for _, v := range refusedEnv {
		if upper == v.name || v.prefix && strings.HasPrefix(upper, v.name) {
			return v.why, v.loader, true
		}
	}
	return "", false, false
}
