package host

import (
	"os/user"
	"strconv"
	"sync"

	"github.com/clihost/clihost/internal/filestamp"
)

// userDBFiles are the files os/user reads (built without cgo, as clihost always is): the answers
// of a lookup depend on nothing else.
var userDBFiles = [2]string{"/etc/passwd", "/etc/group"}

// userEntry is what a lookup of one uid found: its user, and its group ids (nil until asked).
type userEntry struct {
	u      *user.User
	err    error
	groups []string
	gerr   error
	asked  bool
}

// userDB caches the password and group database lookups of identityFor, for as long as neither
// file changes: every lookup stats both files and drops the cache when either stamp differs.
type userDB struct {
	mu     sync.Mutex
	stamps [2]filestamp.Stamp
	users  map[int]*userEntry
}

// users is the process's cache of user lookups.
var users userDB

// stampsNow returns the stamps of userDBFiles, and whether answers read from them now may be
// kept (both exist and neither changed within filestamp.RacyWindow).
func stampsNow() ([2]filestamp.Stamp, bool) {
	var out [2]filestamp.Stamp
	keep := true
	for i, p := range userDBFiles {
		var ok bool
		if out[i], ok = filestamp.Path(p); !ok {
			keep = false
		}
	}
	return out, keep
}

// entry returns uid's cache entry, fresh when the files changed since it was made; keep says
// whether what is learnt now may stay in the cache. Called with mu held.
func (db *userDB) entry(uid int) (e *userEntry, keep bool) {
	stamps, keep := stampsNow()
	if !keep || stamps != db.stamps || db.users == nil {
		db.users = map[int]*userEntry{}
		db.stamps = stamps
	}
	if e, ok := db.users[uid]; ok {
		return e, keep
	}
	e = &userEntry{}
	e.u, e.err = user.LookupId(strconv.Itoa(uid))
	if keep {
		db.users[uid] = e
	}
	return e, keep
}

// lookupUID is user.LookupId, cached while the password and group files do not change.
func lookupUID(uid int) (*user.User, error) {
	users.mu.Lock()
	defer users.mu.Unlock()
	e, _ := users.entry(uid)
	if e.err != nil {
		return nil, e.err
	}
	u := *e.u
	return &u, nil
}

// groupIDsOf is uid's user's GroupIds, cached as lookupUID is.
func groupIDsOf(uid int) ([]string, error) {
	users.mu.Lock()
	defer users.mu.Unlock()
	e, _ := users.entry(uid)
	if e.err != nil {
		return nil, e.err
	}
	if !e.asked {
		e.groups, e.gerr = e.u.GroupIds()
		e.asked = true
	}
	return append([]string(nil), e.groups...), e.gerr
}
