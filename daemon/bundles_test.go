package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusedBundleIsNotLoaded: a folder whose only bundle has lint errors serves nothing, so
// the summary status prints says 0 loaded, 1 refused, and the daemon warns "no bundles loaded"
// (it counted the refused bundle as loaded: "1 loaded, 1 refused" and no warning).
func TestRefusedBundleIsNotLoaded(t *testing.T) {
	dir, err := filepath.Abs("testdata/refused") // a complete bundle but for one misspelt key
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	_, sum, err := loadBundles(slog.New(slog.NewTextHandler(&logged, nil)), Config{Bundles: []string{dir}, NoCatalog: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Loaded != 0 || sum.Refused != 1 {
		t.Errorf("loaded %d, refused %d; want 0 and 1", sum.Loaded, sum.Refused)
	}
	if !strings.Contains(logged.String(), `msg="no bundles loaded"`) {
		t.Errorf("no warning that nothing is served:\n%s", logged.String())
	}
}

// TestReapedGroupsLogged: the start-up line about removed control groups names the groups, and
// an error only when there was one (it logged err=<nil> beside every removal), and a failure
// to reap is logged as such, not as "removed" with no groups.
func TestReapedGroupsLogged(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	logReaped(log, []string{"clihost-1-1"}, nil)
	if s := logged.String(); !strings.Contains(s, "groups=[clihost-1-1]") || strings.Contains(s, "err=") {
		t.Errorf("removal: %s", s)
	}
	logged.Reset()
	logReaped(log, nil, errors.New("permission denied"))
	if s := logged.String(); strings.Contains(s, "removed the control groups") || !strings.Contains(s, `err="permission denied"`) {
		t.Errorf("failure: %s", s)
	}
	logged.Reset()
	logReaped(log, nil, nil)
	if logged.Len() != 0 {
		t.Errorf("nothing to reap logged: %s", logged.String())
	}
}
