package daemon

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// The status page's logins: `clihostctl open` mints a one-time code (over the control socket,
// operator only), the browser exchanges it at /login for a session cookie.
const (
	pageCodeTTL     = 2 * time.Minute // a login URL works once, within this
	pageSessionTTL  = 8 * time.Hour   // a session cookie works this long after its login
	pageMaxCodes    = 16              // codes not yet used; past it the one expiring first is dropped
	pageMaxSessions = 32              // sessions; past it the one expiring first is dropped
)

// pageSessions holds the status page's login codes and sessions in memory (a restart ends them),
// each by the SHA-256 of its value with its expiry. The zero value is ready; it is safe for
// concurrent use.
type pageSessions struct {
	mu       sync.Mutex
	codes    map[string]time.Time
	sessions map[string]time.Time
}

// mintCode makes a login code valid until now+pageCodeTTL.
func (p *pageSessions) mintCode(now time.Time) (code string, expires time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.codes == nil {
		p.codes = map[string]time.Time{}
	}
	code, expires = randomSecret(), now.Add(pageCodeTTL)
	keep(p.codes, now, pageMaxCodes-1)
	p.codes[digest(code)] = expires
	return code, expires
}

// redeem uses up code: it reports whether the code was minted and had not expired or been used,
// and then makes a session, returning its value and expiry.
func (p *pageSessions) redeem(code string, now time.Time) (session string, expires time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := digest(code)
	exp, found := p.codes[key]
	delete(p.codes, key) // once, whatever the outcome
	if !found || !now.Before(exp) {
		return "", time.Time{}, false
	}
	if p.sessions == nil {
		p.sessions = map[string]time.Time{}
	}
	session, expires = randomSecret(), now.Add(pageSessionTTL)
	keep(p.sessions, now, pageMaxSessions-1)
	p.sessions[digest(session)] = expires
	return session, expires, true
}

// valid reports whether session is a live session.
func (p *pageSessions) valid(session string, now time.Time) bool {
	if session == "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	exp, ok := p.sessions[digest(session)]
	return ok && now.Before(exp)
}

// keep drops the expired entries of m, then those expiring first until at most n are left.
func keep(m map[string]time.Time, now time.Time, n int) {
	for k, exp := range m {
		if !now.Before(exp) {
			delete(m, k)
		}
	}
	for len(m) > n {
		first := ""
		for k, exp := range m {
			if first == "" || exp.Before(m[first]) {
				first = k
			}
		}
		delete(m, first)
	}
}

// randomSecret is 32 random bytes, hex.
func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// digest is the SHA-256 of s, hex: the key a secret is kept under.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
