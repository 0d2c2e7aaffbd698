package tests

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestReview19ConcurrentCallersOwnAnswersAndRootFiles (outside review 19, commit 6f33480: access
// checks on borrowed threads): on a root clihostd, two users of the control socket call at once,
// each in its own 0700 workspace and in the other's, and root calls too (run as the workspace's
// owner). Each allowed call runs as its own caller, each call naming the other's workspace is
// refused naming its caller (no check's answer goes to another call), and afterwards every file
// the daemon wrote in its state directory (audit log, state, installed CLIs) is root's, except a
// kept home homes/UID and what is in it, which is UID's: no file was created by a thread that
// still had a caller's fsuid or fsgid.
func TestReview19ConcurrentCallersOwnAnswersAndRootFiles(t *testing.T) {
	d := rootDaemon(t)
	a := fixture.User(t, memberName, sockGroup, shareGroup)
	b := fixture.User(t, "clihost-t-r19b", sockGroup)
	wsA, wsB := filepath.Join(a.Home, "r19"), filepath.Join(b.Home, "r19")
	privateDir(t, wsA, a.UID, a.GID, 0o700)
	privateDir(t, wsB, b.UID, b.GID, 0o700)
	type callCase struct {
		u       fixture.TestUser
		ws      string
		allowed bool
	}
	cases := []callCase{{a, wsA, true}, {b, wsB, true}, {a, wsB, false}, {b, wsA, false}}
	var wg sync.WaitGroup
	problems := make(chan string, 100)
	// call posts a call of id who in ws to the control socket as u (root when nil), with curl, and
	// returns its envelope (no t.Fatal: it runs on goroutines of its own).
	call := func(u *fixture.TestUser, ws string) (identityEnvelope, error) {
		cmd := exec.Command("curl", "-sS", "--unix-socket", d.socket, "-H", "Content-Type: application/json",
			"--data-binary", `{"bundle": "id", "tool": "who", "workspace": "`+ws+`"}`, "http://clihostd/v1/call")
		cmd.Dir = "/"
		if u != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: groupsOf(*u)}}
		}
		out, err := cmd.Output()
		var env identityEnvelope
		if err == nil {
			err = json.Unmarshal(out, &env)
		}
		if err != nil {
			return env, fmt.Errorf("%v: %s", err, out)
		}
		return env, nil
	}
	idOf := func(out string) (uid, gid int) {
		m := regexp.MustCompile(`uid=(\d+)\S* gid=(\d+)`).FindStringSubmatch(out)
		if m == nil {
			return -1, -1
		}
		uid, _ = strconv.Atoi(m[1])
		gid, _ = strconv.Atoi(m[2])
		return uid, gid
	}
	for i := range 32 {
		c := cases[i%len(cases)]
		wg.Go(func() {
			env, err := call(&c.u, c.ws)
			switch {
			case err != nil:
				problems <- fmt.Sprintf("%s in %s: %v", c.u.Name, c.ws, err)
			case c.allowed && !env.OK:
				problems <- fmt.Sprintf("%s in its own workspace: %+v", c.u.Name, env.Error)
			case c.allowed:
				if uid, gid := idOf(fmt.Sprint(env.Value)); uid != c.u.UID || gid != c.u.GID {
					problems <- fmt.Sprintf("%s's call ran as %d:%d", c.u.Name, uid, gid)
				}
			case env.OK || env.Error == nil || env.Error.Code != "workspace_denied" || !strings.Contains(env.Error.Message, c.u.Name+" (uid "+strconv.Itoa(c.u.UID)+")"):
				problems <- fmt.Sprintf("%s naming %s: %+v %v", c.u.Name, c.ws, env.Error, env.Value)
			}
		})
		if i%4 == 0 {
			wg.Go(func() { // root's call in a's workspace runs as a (its owner)
				env, err := call(nil, wsA)
				if err != nil || !env.OK {
					problems <- fmt.Sprintf("root in %s: %v %+v", wsA, err, env.Error)
					return
				}
				if uid, _ := idOf(fmt.Sprint(env.Value)); uid != a.UID {
					problems <- fmt.Sprintf("root's call in %s ran as %d, want its owner %d", wsA, uid, a.UID)
				}
			})
		}
	}
	wg.Wait()
	close(problems)
	for p := range problems {
		t.Error(p)
	}
	homes := filepath.Join(d.state, "homes")
	err := filepath.WalkDir(d.state, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		want := uint32(0)
		if rel, err := filepath.Rel(homes, p); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			n, _ := strconv.Atoi(strings.Split(rel, string(filepath.Separator))[0])
			want = uint32(n)
		}
		if sys.Uid != want || sys.Uid == 0 && sys.Gid != 0 {
			t.Errorf("%s: owned by %d:%d, want uid %d (root's group when root's)", p, sys.Uid, sys.Gid, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.state, "audit.jsonl")); err != nil {
		t.Errorf("no audit log to look at: %v", err)
	}
}
