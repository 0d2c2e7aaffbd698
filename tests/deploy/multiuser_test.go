package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestSeveralUsersOneSocket runs one root daemon whose control socket the group ct-clihost may use
// (--group): alice and bob, members, each call in their own workspace and the CLI runs as
// themselves; alice naming bob's workspace or home is refused (workspace_denied); mallory, not a
// member, is refused at the socket; root calling in alice's workspace runs as alice (the
// workspace's owner: there is no --agent-user).
func TestSeveralUsersOneSocket(t *testing.T) {
	need(t)
	fixture.Need(t, "jq", "git", "curl")
	dir := scratch(t)
	what := "one root daemon, --group " + svcGroup + ", shared by " + fmtAccounts(alice, bob) + " (members) and " + mallory.name + " (not)"
	d := rootDaemon(t, what, dir, "--group", svcGroup, "--workspace", scratch(t))
	ws := map[*account]string{}
	for _, a := range []*account{alice, bob, mallory} {
		ws[a] = filepath.Join(a.home, "mu-project")
		project(t, a, ws[a])
		t.Cleanup(func() { os.RemoveAll(ws[a]) })
	}

	for _, a := range []*account{alice, bob} {
		if uid, ok, _ := d.ranAs(t, a, ws[a], "a member calls in their own workspace"); ok && uid != a.uid {
			t.Errorf("%s: %v's call in their own workspace ran as uid %d, want theirs", what, a, uid)
		}
		checkJQ(t, what, d.mustCall(t, a, ws[a], "jq", "filter", jqInput, "a member calls jq in their own workspace"))
	}
	d.expectZygoteServed(t)
	// bob's home is 0700: clihostctl as alice cannot even stat his project, so the request is
	// posted as a client that skips that check would; his home itself alice can stat.
	expectWorkspaceDenied(t, what+": "+alice.name+" names "+ws[bob]+" (posting to the socket herself)",
		d.rawCall(t, alice, ws[bob], "mark", "file", `{"name": "from-alice"}`), ws[bob], alice, alice.uid, false)
	expectWorkspaceDenied(t, what+": "+alice.name+" names "+bob.home,
		d.call(t, alice, bob.home, "mark", "file", `{"name": "from-alice"}`), bob.home, alice, alice.uid, false)
	expectSocketRefused(t, what, mallory, d.call(t, mallory, ws[mallory], "mark", "file", `{"name": "from-mallory"}`))
	if uid, ok, _ := d.ranAs(t, nil, ws[alice], "root may name any workspace"); ok && uid != alice.uid {
		t.Errorf("%s: root's call in %v's workspace ran as uid %d, want the workspace owner's %d", what, alice, uid, alice.uid)
	}

	t.Run("setup is per user", func(t *testing.T) {
		// A workspace both members may use; alice sets the bundle up there, bob has not.
		shared := filepath.Join(dir, "shared")
		grp, err := lookupGroup(svcGroup)
		if err != nil {
			t.Fatal(err)
		}
		mkdir(t, shared, 0o2770, 0, grp)
		if r := ctl(t, alice, d.socket, "setup", "project", "--value", "name=alices-project", "--workspace", shared); r.code != 0 {
			t.Fatalf("%s: clihostctl setup project as %v in %s: %v", what, alice, shared, r)
		}
		// printenv exits 0 only when CT_PROJECT is set (its value comes back redacted).
		d.mustCall(t, alice, shared, "project", "show", `{}`, "her own setup applies")
		if e := d.call(t, bob, shared, "project", "show", `{}`); e.OK || e.Error == nil || e.Error.Code != "setup_required" || strings.Contains(e.raw.stdout, "alices-project") {
			t.Errorf("%s: %v's call in the shared workspace must not get %v's setup (setup_required); got:\n%v", what, bob, alice, e.raw)
		}
	})
}
