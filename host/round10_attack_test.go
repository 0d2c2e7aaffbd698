package host

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/clihost/clihost/errcode"
	"golang.org/x/sys/unix"
)

// Round 10's attacks on the host's workspace overlap check: the parse of the mount table is now
// shared between checks (lastMounts, reused while the table's text reads the same), and a root
// host runs the check on a goroutine of its own beside the access checks (ownedOverlapBeside).
// Run them with -race too.

// TestRound10SharedMountParseUnderConcurrentChecks: many goroutines check workspaces at once, with
// the shared parse of the mount table, while the state directory is bind-mounted inside one of
// them and unmounted again, and a folder holding that mount is renamed (which moves the mount in
// the table without a mount event). Every check made while the table is in one state must judge
// by that state: the workspace holding the mount is refused, one beside it is not, and after the
// unmount neither is. The race detector watches the shared parse.
func TestRound10SharedMountParseUnderConcurrentChecks(t *testing.T) {
	p, _ := mountTree(t, "ws/a/sub", "state", "clean")
	sub, state, clean := p[0], p[1], p[2]
	a := filepath.Dir(sub)
	ws := filepath.Dir(a)
	b := filepath.Join(ws, "b")
	t.Cleanup(func() {
		_ = unix.Unmount(sub, unix.MNT_DETACH)
		_ = unix.Unmount(filepath.Join(b, "sub"), unix.MNT_DETACH)
	})
	var phase sync.RWMutex // held for writing while the table changes
	mounted := false
	where := a // the folder holding the mount point
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				phase.RLock()
				holder, refused := where, mounted
				eWs := OwnedOverlap(ws, state)
				eHolder := OwnedOverlap(holder, state)
				eClean := OwnedOverlap(clean, state)
				phase.RUnlock()
				if (eWs != nil) != refused || (eHolder != nil) != refused {
					t.Errorf("mounted %t (in %s): the workspace %+v, the folder holding the mount %+v", refused, holder, eWs, eHolder)
				}
				if refused && (eWs.Code != errcode.WorkspaceDenied || eHolder.Code != errcode.WorkspaceDenied) {
					t.Errorf("refused with %s and %s, want workspace_denied", eWs.Code, eHolder.Code)
				}
				if eClean != nil {
					t.Errorf("a workspace beside the state directory: %+v", eClean)
				}
			}
		})
	}
	change := func(f func() error) {
		phase.Lock()
		defer phase.Unlock()
		if err := f(); err != nil {
			t.Error(err)
		}
	}
	for range 100 {
		change(func() error {
			mounted = true
			return unix.Mount(state, filepath.Join(where, "sub"), "", unix.MS_BIND, "")
		})
		change(func() error { // a rename moves the mount in the table: no mount event
			next := b
			if where == b {
				next = a
			}
			err := os.Rename(where, next)
			where = next
			return err
		})
		change(func() error {
			mounted = false
			return unix.Unmount(filepath.Join(where, "sub"), 0)
		})
		if t.Failed() {
			break
		}
	}
	close(stop)
	wg.Wait()
}

// TestRound10OverlapConcurrentCalls: OwnedOverlap answers each of many calls at once for its own
// workspace, refused and not (the calls share the parse of the mount table, lastMounts).
func TestRound10OverlapConcurrentCalls(t *testing.T) {
	p, mount := mountTree(t, "ws/sub", "state", "clean")
	sub, state, clean := p[0], p[1], p[2]
	ws := filepath.Dir(sub)
	mount("--bind", state, sub)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			w, refused := clean, false
			if i%2 == 0 {
				w, refused = ws, true
			}
			if e := OwnedOverlap(w, state); (e != nil) != refused || refused && e.Code != errcode.WorkspaceDenied {
				t.Errorf("call %d, workspace %s: %+v, want refused %t", i, w, e, refused)
			}
		})
	}
	wg.Wait()
}
