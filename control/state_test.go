package control

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// stateBackend is a fakeBackend that keeps a state database.
type stateBackend struct {
	fakeBackend
	checkErr error
}

func (stateBackend) BackupState(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, "SECRET-RECORDS")
	return int64(n), err
}
func (s stateBackend) CheckState() error { return s.checkErr }
func (stateBackend) StateFile() string   { return "/state/state.db" }
func (stateBackend) StateVersion() int   { return 1 }

// TestStateBackupOnlyForRootAndOwner: the backup holds every scope's records and the sealed
// secrets: a member of --group gets 403 and none of it; the check is open to every admitted peer.
func TestStateBackupOnlyForRootAndOwner(t *testing.T) {
	h := Handler(stateBackend{}, Admission{OwnerUID: 1000, GroupID: 4242})
	for _, c := range ownerOnlyPeers {
		rec := get(h, PathStateBackup, c.peer)
		if rec.Code != c.want {
			t.Errorf("%s: HTTP %d, want %d (%s)", c.name, rec.Code, c.want, rec.Body.String())
		}
		if got := strings.Contains(rec.Body.String(), "SECRET-RECORDS"); got != (c.want == http.StatusOK) {
			t.Errorf("%s: body %q", c.name, rec.Body.String())
		}
		if rec := get(h, PathStateCheck, c.peer); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ok":true`) {
			t.Errorf("%s: check: HTTP %d %s", c.name, rec.Code, rec.Body.String())
		}
	}
	bad := Handler(stateBackend{checkErr: errors.New("page 4 is damaged")}, Admission{OwnerUID: 1000, GroupID: -1})
	if rec := get(bad, PathStateCheck, Peer{UID: 1000}); !strings.Contains(rec.Body.String(), `"ok":false`) || !strings.Contains(rec.Body.String(), "page 4 is damaged") {
		t.Errorf("damaged check: %s", rec.Body.String())
	}
}

// ownerOnlyPeers are the peers of a daemon admitting {OwnerUID: 1000, GroupID: 4242}, each with
// the status an endpoint only root and the daemon's own user may use answers it.
var ownerOnlyPeers = []struct {
	name string
	peer Peer
	want int
}{
	{"root", Peer{UID: 0, GID: 0}, http.StatusOK},
	{"the daemon's user", Peer{UID: 1000, GID: 1000}, http.StatusOK},
	{"a member of --group", Peer{UID: 1001, GID: 1001, Groups: []int{4242}}, http.StatusForbidden},
}

// get serves GET path to peer.
func get(h http.Handler, path string, peer Peer) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req = req.WithContext(context.WithValue(req.Context(), peerKey{}, peer))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
