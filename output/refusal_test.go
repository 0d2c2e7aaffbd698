package output

import (
	"testing"

	"github.com/clihost/clihost/manifest"
)

// TestRefusalFormats takes the refused path from the formats real CLIs print, and no path from
// lines that only look alike.
func TestRefusalFormats(t *testing.T) {
	for _, c := range []struct {
		text, path string
		refused    bool
	}{
		{"jq: error: Could not open file /etc/shadow: Permission denied", "/etc/shadow", true},
		{"jq: error: Could not open /etc/shadow: Permission denied", "/etc/shadow", true},
		{"rg: /root/x: Permission denied (os error 13)", "/root/x", true},
		{"/etc/shadow: Permission denied (os error 13)", "/etc/shadow", true},
		{"cat: /etc/shadow: Permission denied", "/etc/shadow", true},
		{"cat: notes.txt: Permission denied", "notes.txt", true},
		{"ls: cannot open directory '/root': Permission denied", "/root", true},
		{"mkdir: cannot create directory ‘locked/x’: Read-only file system", "locked/x", true},
		{"fatal: could not open '/etc/x' for reading: Permission denied", "/etc/x", true},
		{"error: could not lock config file .git/config: Permission denied", ".git/config", true},
		{"warning: unable to access '/root/.config/git/attributes': Permission denied\nerror: open(\"secret.txt\"): Permission denied\nfatal: cannot hash secret.txt", "secret.txt", true},
		{"warning: unable to access '/root/.config/git/attributes': Permission denied", "/root/.config/git/attributes", true},
		{"failed to read configuration: open /root/.config/gh/config.yml: permission denied", "/root/.config/gh/config.yml", true},
		{"fork/exec /usr/bin/git: operation not permitted", "/usr/bin/git", true},
		{"PermissionError: [Errno 13] Permission denied: '/srv/data.csv'", "/srv/data.csv", true},
		{"Error: EACCES: permission denied, open '/home/u/.npmrc'", "/home/u/.npmrc", true},
		// Refusals without a path.
		{"ping: socket: Operation not permitted", "", true},
		{"fatal: Unable to read current working directory: Permission denied", "", true},
		{"HTTP 403: Permission denied", "", true},
		// Not a refusal of this host: ssh refusing a key, a gRPC status, other errors.
		{"git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.", "", false},
		{"ERROR: (gcloud.compute.instances.list) PERMISSION_DENIED: Required 'compute.instances.list' permission", "", false},
		{"jq: error: Could not open file missing.json: No such file or directory", "", false},
	} {
		path, refused := Refusal(c.text)
		if path != c.path || refused != c.refused {
			t.Errorf("Refusal(%q) = %q, %v; want %q, %v", c.text, path, refused, c.path, c.refused)
		}
	}
}

// TestClassifyNeedsAuthForAuthentication: the authentication category (and its login hint) comes
// from a failure's text only for a bundle that declares auth; a refused path is a permission
// problem either way; an exit code the bundle names auth_required stays authentication.
func TestClassifyNeedsAuthForAuthentication(t *testing.T) {
	noAuth := For(&manifest.CLI{}, nil)
	withAuth := For(&manifest.CLI{Auth: &manifest.Auth{}}, nil)
	withAuth.ExitCodes[4] = "auth_required"
	fail := func(c Convention, exit int, stderr string) *Failure {
		return Parse(c, Process{ExitCode: exit, Stderr: []byte(stderr)}).Failure
	}
	for _, c := range []struct {
		conv           Convention
		exit           int
		stderr         string
		category, path string
	}{
		{noAuth, 1, "error: not logged in", CategoryUnknown, ""},
		{noAuth, 1, "401 Unauthorized", CategoryUnknown, ""},
		{noAuth, 1, "HTTP 403: Permission denied", CategoryPermission, ""},
		{noAuth, 2, "cat: /etc/shadow: Permission denied", CategoryPermission, "/etc/shadow"},
		{noAuth, 1, "error: rate limit exceeded", CategoryRateLimit, ""},
		{withAuth, 1, "error: not logged in", CategoryAuthentication, ""},
		{withAuth, 1, "HTTP 403: Permission denied", CategoryAuthentication, ""},
		{withAuth, 1, "open /root/.config/gh/config.yml: permission denied", CategoryPermission, "/root/.config/gh/config.yml"},
		{withAuth, 4, "To get started with GitHub CLI, please run:  gh auth login", CategoryAuthentication, ""},
	} {
		f := fail(c.conv, c.exit, c.stderr)
		if f.Category != c.category || f.Path != c.path {
			t.Errorf("auth %v, %q: category %q path %q, want %q %q", c.conv.Auth, c.stderr, f.Category, f.Path, c.category, c.path)
		}
		if login := f.Category == CategoryAuthentication; login != (f.Hint == hintFor("auth_required", "", "", 0)) {
			t.Errorf("auth %v, %q: hint %q", c.conv.Auth, c.stderr, f.Hint)
		}
	}
}
