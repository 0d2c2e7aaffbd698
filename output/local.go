package output

import "regexp"

// CategoryLocal is the provider category of a failure on this host rather than at the provider:
// the CLI could not read, write or find one of its own files (EACCES, EPERM, EROFS, ENOENT on a
// path: a config folder it may not create, a grant the sandbox lacks), or the egress proxy
// refused a host by policy. It is clihost's addition to the protocol's ten categories. Calling
// the same provider again would fail the same way (no retry); another provider bundle has its
// own files and grants (fall back).
const CategoryLocal = "local"

// localFailure matches what CLIs print for a local file they could not use, and the egress
// proxy's policy refusal:
//
//   - Node: "EACCES: permission denied, mkdir '/root/.gemini'", "ENOENT: no such file or
//     directory, open '/x'" (not "spawn claude ENOENT", a missing command: not_found);
//   - Rust: "Permission denied (os error 13)", "No such file or directory (os error 2)",
//     "Read-only file system (os error 30)", "Operation not permitted (os error 1)";
//   - Go, coreutils, Python: "open /x: permission denied", "/x: No such file or directory",
//     "[Errno 13] Permission denied: '/x'";
//   - the egress proxy's refusal as a client reports it: "egress proxy: host … is not in the
//     egress allowlist", "… refused addresses …", "IP literal …", "port … is not allowed", and
//     Node's tunnel error for it, "Proxy response (403) !== 200 when HTTP Tunneling".
//
// Google's API status PERMISSION_DENIED (a key without access) is authentication, not local: it
// names no path.
var localFailure = regexp.MustCompile(`(?i)\b(?:EACCES|EPERM|EROFS|ENOENT): [^,\n]*, \w+ '|` +
	`\(os error (?:1|2|13|30)\)|\[Errno (?:1|2|13|30)\]|` +
	`(?:^|[\s'"])(?:~|\.{0,2})/[^\s:'"]*['"]?: (?:permission denied|operation not permitted|read-only file system|no such file or directory)|` +
	`\b(?:open|mkdir|stat|lstat|access|rename|unlink|creat|scandir|opendir) (?:~|\.{0,2})/\S*: (?:permission denied|operation not permitted|read-only file system|no such file or directory)|` +
	`egress proxy: (?:host \S+ is not in the egress allowlist|\S+ resolves only to refused addresses|IP literal|port \d+ is not allowed)|` +
	`proxy response \(403\)`)

// localClass is the class of a local failure.
var localClass = Class{Category: CategoryLocal, Fallback: true}

// localMasks are the categories a local failure replaces (see ClassifyProvider).
var localMasks = map[string]bool{CategoryAuthentication: true, CategoryNotFound: true, CategoryConfiguration: true,
	CategoryValidation: true, CategoryUnknown: true}
