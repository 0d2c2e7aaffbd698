package control

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// PathStateBackup streams a consistent copy of the daemon's state.db: GET → the bbolt file
// (application/octet-stream), written online. Root and the daemon's own user only.
const PathStateBackup = "/v1/state/backup"

// PathStateCheck runs bbolt's consistency check on the daemon's open state.db: GET → StateCheck.
const PathStateCheck = "/v1/state/check"

// StateBackend is what a Backend offers for its state database, when it has one.
type StateBackend interface {
	// BackupState writes a consistent copy of the state database to w.
	BackupState(w io.Writer) (int64, error)
	// CheckState runs the consistency check; nil when the database is consistent.
	CheckState() error
	// StateFile is the state database's path.
	StateFile() string
	// StateVersion is the state database's storage version (store.SchemaVersion once open).
	StateVersion() int
}

// StateCheck is the result of the consistency check of the daemon's state.db.
type StateCheck struct {
	File    string `json:"file"`
	Version int    `json:"version,omitempty"` // the storage version; 0 from a daemon that does not say
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// stateHandlers adds the state endpoints to mux when b keeps a state database.
func stateHandlers(mux *http.ServeMux, b Backend, a Admission) {
	sb, ok := b.(StateBackend)
	if !ok {
		return
	}
	mux.HandleFunc("GET "+PathStateCheck, func(w http.ResponseWriter, _ *http.Request) {
		c := StateCheck{File: sb.StateFile(), Version: sb.StateVersion(), OK: true}
		if err := sb.CheckState(); err != nil {
			c.OK, c.Error = false, err.Error()
		}
		writeJSON(w, c)
	})
	mux.HandleFunc("GET "+PathStateBackup, func(w http.ResponseWriter, r *http.Request) {
		// It holds every install, setup and login record and the sealed secrets.
		if !a.operatorOnly(w, r, "only root or clihostd's own user may back up its state",
			"ask the operator (sudo clihostctl state backup FILE)") {
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = sb.BackupState(w) // a failure mid-stream cuts the body short: the client checks the copy
	})
}

// StateCheck asks the daemon to check its state database.
func (c *Client) StateCheck(ctx context.Context) (StateCheck, error) {
	var s StateCheck
	return s, c.getJSON(ctx, PathStateCheck, &s)
}

// StateBackup copies the daemon's state database to w.
func (c *Client) StateBackup(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.do(ctx, http.MethodGet, PathStateBackup, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("state backup: %w", err)
	}
	return n, nil
}
