package access

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// tree builds, under a fresh root-owned folder (mode 0755):
//
//	own/       owner's, 0700
//	group/     root's, group share, 0770
//	closed/    root's, 0700, holding open/ (0777): reachable by no one but root
//	acl/       root's, 0700, with an ACL granting the member rwx
//	link       → own/
//	via/       owner's, 0755, holding a link x → ../group
func tree(t *testing.T, owner, member fixture.TestUser, share int, withACL bool) string {
	t.Helper()
	base := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(filepath.Dir(base), 0o755)) // t.TempDir's own folder is 0700
	must(os.Chmod(base, 0o755))
	mk := func(rel string, uid, gid int, mode os.FileMode) {
		p := filepath.Join(base, rel)
		must(os.Mkdir(p, mode))
		must(os.Chown(p, uid, gid))
		must(os.Chmod(p, mode))
	}
	mk("own", owner.UID, owner.GID, 0o700)
	mk("group", 0, share, 0o770)
	mk("closed", 0, 0, 0o700)
	mk("closed/open", 0, 0, 0o777)
	mk("acl", 0, 0, 0o700)
	mk("via", owner.UID, owner.GID, 0o755)
	must(os.Symlink("own", filepath.Join(base, "link")))
	must(os.Symlink("../group", filepath.Join(base, "via", "x")))
	if withACL {
		if out, err := exec.Command("setfacl", "-m", "u:"+member.Name+":rwx", filepath.Join(base, "acl")).CombinedOutput(); err != nil {
			t.Fatalf("setfacl: %v: %s", err, out)
		}
	}
	return base
}

func users(t *testing.T) (owner, member, outsider fixture.TestUser, share int) {
	fixture.NeedRoot(t)
	owner = fixture.User(t, "clihost-t-owner")
	member = fixture.User(t, "clihost-t-member", "clihost-t-share")
	outsider = fixture.User(t, "clihost-t-outside")
	return owner, member, outsider, member.Groups[0]
}

func who(u fixture.TestUser) Who { return Who{UID: u.UID, GID: u.GID, Groups: u.Groups} }

// TestCheckDirKernel: the root daemon's check, as the kernel decides it for each user.
func TestCheckDirKernel(t *testing.T) {
	fixture.Need(t, "setfacl")
	owner, member, outsider, share := users(t)
	base := tree(t, owner, member, share, true)
	for _, c := range []struct {
		dir  string
		u    fixture.TestUser
		want bool
	}{
		{"own", owner, true}, {"own", member, false}, {"own", outsider, false},
		{"group", member, true}, {"group", owner, false}, {"group", outsider, false},
		{"closed/open", owner, false}, {"closed/open", member, false}, // a 0700 parent
		{"acl", member, true}, {"acl", owner, false}, // an ACL grant
		{"link", owner, true}, {"link", member, false}, // a symlink to own/
		{"via/x", member, true}, {"via/x", outsider, false}, // a symlink inside the path
	} {
		err := CheckDir(filepath.Join(base, c.dir), who(c.u))
		if got := err == nil; got != c.want {
			t.Errorf("%s as %s: %v, want allowed=%v", c.dir, c.u.Name, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("%s as %s: %v is not ErrDenied", c.dir, c.u.Name, err)
		}
	}
	// The checks ran on threads of their own: this process is still fully root.
	if err := CheckDir(filepath.Join(base, "closed/open"), Who{}); err != nil {
		t.Fatalf("root: %v", err)
	}
	if _, err := os.ReadDir(filepath.Join(base, "own")); err != nil {
		t.Fatalf("the process lost root's rights: %v", err)
	}
}

// TestCheckDirModeBits: the non-root daemon's check agrees with the kernel on modes, ancestors and
// symlinks, and refuses where an ACL could decide otherwise unless the user owns the directory.
func TestCheckDirModeBits(t *testing.T) {
	fixture.Need(t, "setfacl")
	owner, member, outsider, share := users(t)
	base := tree(t, owner, member, share, true)
	for _, c := range []struct {
		dir  string
		u    fixture.TestUser
		want bool
	}{
		{"own", owner, true}, {"own", member, false}, {"own", outsider, false},
		{"group", member, true}, {"group", owner, false}, {"group", outsider, false},
		{"closed/open", owner, false}, {"closed/open", member, false},
		{"acl", member, false}, {"acl", owner, false}, // fail closed: an ACL not evaluated
		{"link", owner, true}, {"link", member, false},
		{"via/x", member, true}, {"via/x", outsider, false},
	} {
		err := modeBits(filepath.Join(base, c.dir), who(c.u))
		if got := err == nil; got != c.want {
			t.Errorf("%s as %s: %v, want allowed=%v", c.dir, c.u.Name, err, c.want)
		}
	}
	// The owner of a directory with an ACL: the owner bits decide.
	if err := os.Chown(filepath.Join(base, "acl"), owner.UID, owner.GID); err != nil {
		t.Fatal(err)
	}
	if err := modeBits(filepath.Join(base, "acl"), who(owner)); err != nil {
		t.Errorf("owner of a directory with an ACL: %v", err)
	}
}

// TestCheckExec: a root host asks, as the uid a CLI will run as, whether it may execute the CLI's
// binary; a binary under a folder that uid cannot search (a pyenv shim in root's 0700 home) is
// refused naming that folder, a file without x bits naming the file; the same binary where every
// user may reach it is allowed.
func TestCheckExec(t *testing.T) {
	_, _, outsider, _ := users(t)
	base := t.TempDir()
	if err := os.Chmod(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "root")                   // root's home, 0700
	shim := filepath.Join(home, ".pyenv", "shims", "aws") // 0755 inside
	open := filepath.Join(base, "bin", "aws")             // 0755 on a reachable path
	plain := filepath.Join(base, "bin", "data")           // 0644
	for _, d := range []string{filepath.Dir(shim), filepath.Dir(open)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{shim: 0o755, open: 0o755, plain: 0o644} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	who := Who{UID: outsider.UID, GID: outsider.GID, Groups: outsider.Groups}
	var de *DeniedError
	if err := CheckExec(shim, who); !errors.As(err, &de) || de.Reason != home+" may not be searched" {
		t.Errorf("the shim in root's home: %v, want %s named as the folder that may not be searched", err, home)
	}
	if err := CheckExec(plain, who); !errors.As(err, &de) || de.Reason != "not executable for this user" {
		t.Errorf("a 0644 file: %v, want not executable", err)
	}
	if err := CheckExec(open, who); err != nil {
		t.Errorf("a 0755 binary on a reachable path: %v, want allowed", err)
	}
	if err := CheckExec(shim, Who{}); err != nil {
		t.Errorf("root itself: %v, want allowed", err)
	}
}

// TestChecksLeaveEveryThreadItsIdentity: the threads that run checks go back to the scheduler with
// the process's identity. Checks as different users, interleaved and concurrent, each get that
// user's answer (never the previous check's identity), root's own check after them gets root's,
// and afterwards every thread of the process has the process's filesystem ids and groups.
func TestChecksLeaveEveryThreadItsIdentity(t *testing.T) {
	owner, member, outsider, share := users(t)
	base := tree(t, owner, member, share, false)
	cases := []struct {
		dir  string
		who  Who
		want bool
	}{
		{"own", who(owner), true}, {"own", who(outsider), false}, {"group", who(member), true},
		{"group", who(owner), false}, {"closed/open", Who{}, true}, {"closed/open", who(member), false},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(cases)*20)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 * len(cases) {
				c := cases[(g+i)%len(cases)]
				if err := CheckDir(filepath.Join(base, c.dir), c.who); (err == nil) != c.want {
					errs <- fmt.Sprintf("%s as uid %d: %v, want allowed=%v", c.dir, c.who.UID, err, c.want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if err := CheckDir(filepath.Join(base, "closed/open"), Who{}); err != nil {
		t.Errorf("root after the others: %v", err)
	}
	want := credentials(t, "/proc/self/status")
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads: %v %v", tasks, err)
	}
	for _, task := range tasks {
		if got := credentials(t, task); got != want {
			t.Errorf("%s: %s, want the process's %s", task, got, want)
		}
	}
}

// credentials returns the Uid, Gid and Groups lines of a /proc status file.
func credentials(t *testing.T, status string) string {
	t.Helper()
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "Gid:") || strings.HasPrefix(line, "Groups:") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "; ")
}

// TestCheckDirsExec: the questions asked in one check give CheckDir's answer for each directory
// and CheckExec's for the binary, for a user who may use all, some or none of them; without a
// binary only the directories are asked.
func TestCheckDirsExec(t *testing.T) {
	owner, member, outsider, share := users(t)
	base := tree(t, owner, member, share, false)
	bin := filepath.Join(base, "own", "tool")
	if err := fixture.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dirs := []string{filepath.Join(base, "own"), filepath.Join(base, "group"), filepath.Join(base, "closed"), filepath.Join(base, "missing")}
	for _, c := range []struct {
		u      fixture.TestUser
		dirOK  []bool
		execOK bool
	}{
		{owner, []bool{true, false, false, false}, true},
		{member, []bool{false, true, false, false}, false}, // own/ may not be searched by the member
		{outsider, []bool{false, false, false, false}, false},
	} {
		for _, path := range []string{bin, ""} {
			dirErrs, execErr := CheckDirsExec(dirs, path, who(c.u))
			if len(dirErrs) != len(dirs) {
				t.Fatalf("%d answers for %d directories", len(dirErrs), len(dirs))
			}
			for i, d := range dirs {
				if (dirErrs[i] == nil) != c.dirOK[i] || (dirErrs[i] == nil) != (CheckDir(d, who(c.u)) == nil) {
					t.Errorf("%s as %s: %v, want allowed=%v", d, c.u.Name, dirErrs[i], c.dirOK[i])
				}
			}
			switch {
			case path == "" && execErr != nil:
				t.Errorf("no binary asked, exec answer %v", execErr)
			case path != "" && ((execErr == nil) != c.execOK || (execErr == nil) != (CheckExec(bin, who(c.u)) == nil)):
				t.Errorf("%s as %s: exec %v, want allowed=%v", bin, c.u.Name, execErr, c.execOK)
			}
		}
	}
}

// TestCheckWrites: several writable roots asked in one check: the first one the user may not
// write is named by its index; all writable gives -1.
func TestCheckWrites(t *testing.T) {
	owner, member, outsider, share := users(t)
	base := tree(t, owner, member, share, false)
	own, group, closed := filepath.Join(base, "own"), filepath.Join(base, "group"), filepath.Join(base, "closed/open")
	for _, c := range []struct {
		u     fixture.TestUser
		paths []string
		want  int
	}{
		{owner, []string{own, filepath.Join(base, "via")}, -1},
		{owner, []string{own, group, closed}, 1},
		{member, []string{group, closed}, 1},
		{outsider, []string{own}, 0},
		{outsider, nil, -1},
	} {
		i, err := CheckWrites(c.paths, who(c.u))
		if i != c.want || (err == nil) != (c.want < 0) {
			t.Errorf("%v as %s: %d, %v; want index %d", c.paths, c.u.Name, i, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("%v as %s: %v is not ErrDenied", c.paths, c.u.Name, err)
		}
	}
}

// TestCheckDirsExecSwitchFails: when the thread cannot take the identity (more supplementary
// groups than the kernel allows), no answer is "allowed": every directory and the binary are
// refused with the switch's error; the next check, for a valid identity, answers each entry by
// its own place in the list (a refused directory between allowed ones, the same one twice).
func TestCheckDirsExecSwitchFails(t *testing.T) {
	owner, member, _, share := users(t)
	base := tree(t, owner, member, share, false)
	bin := filepath.Join(base, "own", "tool")
	if err := fixture.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	own, closed := filepath.Join(base, "own"), filepath.Join(base, "closed")
	bad := who(owner)
	bad.Groups = make([]int, 70000) // beyond NGROUPS_MAX (65536): setgroups fails
	for i := range bad.Groups {
		bad.Groups[i] = 100000 + i
	}
	dirErrs, execErr := CheckDirsExec([]string{own, own}, bin, bad)
	for i, err := range dirErrs {
		if err == nil {
			t.Errorf("directory %d allowed though the identity switch failed", i)
		}
	}
	if execErr == nil {
		t.Error("binary allowed though the identity switch failed")
	}
	dirErrs, execErr = CheckDirsExec([]string{closed, own, closed, own}, bin, who(owner))
	for i, want := range []bool{false, true, false, true} {
		if (dirErrs[i] == nil) != want {
			t.Errorf("entry %d as the owner: %v, want allowed=%v", i, dirErrs[i], want)
		}
	}
	if execErr != nil {
		t.Errorf("binary as the owner: %v", execErr)
	}
}
