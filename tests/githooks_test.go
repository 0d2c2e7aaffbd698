package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestCatalogGitHooksDisabled commits through the catalog's git bundle, with the real git, as a
// user whose ~/.gitconfig names a hooks directory (core.hooksPath, as global-hook setups do) with
// a pre-commit hook in it. The bundle disables hooks with `-c core.hooksPath=/dev/null` in
// bin_args, which outranks every config file, so the commit runs no hook and succeeds. Before, the
// bundle set GIT_CONFIG_COUNT/KEY/VALUE in env.set, which the sandbox drops: git ran the hook. A
// hook that is the git binary itself (exec rules allow git) ran and failed the commit with git's
// usage text; a script hook was attempted and failed only because the sandbox may not execute it
// ("cannot exec … Permission denied"). The control is the commit itself and the log showing it.
func TestCatalogGitHooksDisabled(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Need(t, "git")
	u := fixture.User(t, "clihost-t-hooks")
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	if gitBin, err = filepath.EvalSymlinks(gitBin); err != nil {
		t.Fatal(err)
	}
	hooks := filepath.Join(u.Home, "hooks")
	gitconfig := filepath.Join(u.Home, ".gitconfig")
	t.Cleanup(func() { os.RemoveAll(hooks); os.Remove(gitconfig) })
	for _, hook := range []struct{ name, script string }{
		{"git-binary", ""}, // a symbolic link to the git binary: git runs it, with no arguments it exits 1
		{"script", "#!/bin/sh\necho hook ran > hook-ran\nexit 1\n"},
	} {
		t.Run(hook.name, func(t *testing.T) {
			must(t, os.RemoveAll(hooks))
			must(t, os.Mkdir(hooks, 0o755))
			pre := filepath.Join(hooks, "pre-commit")
			if hook.script == "" {
				must(t, os.Symlink(gitBin, pre))
			} else {
				must(t, os.WriteFile(pre, []byte(hook.script), 0o755))
			}
			must(t, os.WriteFile(gitconfig, []byte("[user]\n\tname = Hooks\n\temail = hooks@example.com\n[core]\n\thooksPath = "+hooks+"\n"), 0o644))
			ws := t.TempDir()
			cmd := exec.Command("git", "init", "-q", ws)
			cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git init: %v\n%s", err, out)
			}
			must(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644))
			fixture.Reachable(t, filepath.Dir(ws))
			chownTree(t, ws, u.UID, u.GID)
			chownTree(t, u.Home, u.UID, u.GID)

			policy := allowPolicy(t, "git") // add and commit ask for an approval otherwise
			call := func(tool, input string) envelope {
				r := runBin(t, bin.ctl, "", "call", "git", tool, "--workspace", ws, "--audit", os.DevNull, "--approvals", policy, "--input", input)
				e := decodeEnvelope(t, r)
				if r.code != 0 || !e.OK {
					t.Fatalf("git %s %s: exit %d\n%s", tool, input, r.code, r.stdout)
				}
				return e
			}
			call("add", `{"paths": ["a.txt"]}`)
			call("commit", `{"message": "past the hook"}`)
			if e := call("log", `{}`); !strings.Contains(e.Value.(string), "Hooks <hooks@example.com>") || !strings.HasSuffix(strings.TrimSpace(e.Value.(string)), "past the hook") {
				t.Fatalf("log: %q", e.Value)
			}
			if _, err := os.Lstat(filepath.Join(ws, "hook-ran")); !os.IsNotExist(err) {
				t.Fatalf("the hook ran: %v", err)
			}
		})
	}
}

// chownTree gives dir and everything in it to uid:gid.
func chownTree(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
