package host

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/clihost/clihost/internal/filestamp"

	"github.com/clihost/clihost/internal/fixture"
)

// TestUserDBCacheInvalidated: the cached password and group lookups are dropped as soon as either
// file changes. With the cache warm (the racy window off, so that answers are kept at once), a new
// home and a new group given to the user are seen by the very next lookup, never the cached ones.
func TestUserDBCacheInvalidated(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Need(t, "usermod")
	u := fixture.User(t, "clihost-t-udb")
	gid := fixture.Group(t, "clihost-t-udbgrp")
	old := filestamp.RacyWindow
	filestamp.RacyWindow = 0
	t.Cleanup(func() { filestamp.RacyWindow = old })
	usermod := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("usermod", append(args, u.Name)...).CombinedOutput(); err != nil {
			t.Fatalf("usermod %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() { usermod("--home", u.Home) })

	if got, err := lookupUID(u.UID); err != nil || got.HomeDir != u.Home {
		t.Fatalf("lookupUID(%d) = %+v, %v; want home %s", u.UID, got, err, u.Home)
	}
	groupIDsOf(u.UID)
	users.mu.Lock()
	_, warm := users.users[u.UID]
	users.mu.Unlock()
	if !warm {
		t.Fatal("the lookup was not cached: this test proves nothing")
	}

	moved := filepath.Join(t.TempDir(), "elsewhere")
	usermod("--home", moved)
	if got, err := lookupUID(u.UID); err != nil || got.HomeDir != moved {
		t.Errorf("after usermod --home: lookupUID = %+v, %v; want home %s (a stale cache)", got, err, moved)
	}
	usermod("--append", "--groups", "clihost-t-udbgrp")
	t.Cleanup(func() { _ = exec.Command("gpasswd", "--delete", u.Name, "clihost-t-udbgrp").Run() })
	ids, err := groupIDsOf(u.UID)
	if err != nil || !slices.Contains(ids, strconv.Itoa(gid)) {
		t.Errorf("after usermod --groups: groupIDsOf = %v, %v; want %d among them (a stale cache)", ids, err, gid)
	}
}
