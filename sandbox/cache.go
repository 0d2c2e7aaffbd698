package sandbox

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/clihost/clihost/manifest"
)

// Cache keeps recent compilations for calls of the same Input to use again. A policy is used
// again only when every question its compilation asked outside its Input gets the answer it got
// then (see journal): each lstat and readlink of the paths it resolved, each read of a file whose
// content it parsed (an executable's interpreter, a .git file), each listing of a writable
// folder searched for git directories (and of a git directory's modules and worktrees), each
// variable it read from the caller's environment. The policy is then the one a compilation would
// return at this call, without its work (resolving and checking some hundred paths); only the
// kernel is asked again. A compilation that expanded a deny glob other than NAME or **/NAME
// (./*/*.pem) against the file system or listed too much of a writable tree is not kept, and
// neither is a failed one (a wildcard in a grant's last component, ~/.config/git/*, a deny pattern
// of one component, ~/.ssh/id_*, and one at any depth, **/.env, list their folders, and the
// journal asks those listings again). The state Sweep
// needs from before the call
// (which deny paths exist, the writable roots' identities) is taken at every call. Safe for
// concurrent use; the zero value is not ready, see NewCache.
type Cache struct {
	mu      sync.Mutex
	entries map[cacheKey]*cachedPolicy
	reused  atomic.Int64
	// watch spares a kept policy's lstat and readlink questions while nothing they depend on
	// changed (see watcher); watchedReuse counts the calls it spared them.
	watch        *watcher
	watchedReuse atomic.Int64
}

// maxCachedPolicies bounds the policies a Cache keeps: one per bundle, tool, workspace and
// caller's home used lately.
const maxCachedPolicies = 128

// cacheKey is what of an Input a kept policy must match (Input.LookupEnv's answers are in the
// journal; lookup says whether there is one). The bundle and tool are compared by identity: a
// loaded bundle is never changed, a reload makes another.
type cacheKey struct {
	bundle                        *manifest.Bundle
	tool                          *manifest.ToolEntry
	binary, workspace, home, path string
	budget                        int
	lookup                        bool
	protect, extraDeny            string // joined with NUL, which no path holds
	protects, extraDenies         int    // their lengths: [] and [""] join alike
}

// cachedPolicy is a kept compilation: its policy, without the state of one call, and its
// questions.
type cachedPolicy struct {
	policy  *Policy
	asked   *journal
	watched watched // its watches (guarded by the watcher's lock)
}

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{entries: map[cacheKey]*cachedPolicy{}, watch: processWatcher()} }

// Compile is Compile(in), using a policy kept from an earlier call of the same Input when every
// question its compilation asked gets the same answer now, and keeping this one's when it may be.
func (c *Cache) Compile(in Input) (*Policy, error) {
	key := keyOf(in)
	c.mu.Lock()
	kept := c.entries[key]
	c.mu.Unlock()
	if kept != nil && c.stillSame(kept, in.LookupEnv) {
		c.reused.Add(1)
		return kept.policy.forCall(), nil
	}
	asked := &journal{}
	p, err := compileAsking(in, asked)
	if err != nil || asked.opaque != "" {
		if kept != nil {
			c.forget(key, kept)
		}
		return p, err
	}
	keep := p.clone() // its own copy: the caller may change the one it gets
	keep.Absent, keep.present, keep.roots = nil, nil, nil
	// The next call checks every answer in full, taking the watches; only from that check on
	// may a later call skip some (see stillSame).
	kept = &cachedPolicy{policy: keep, asked: asked, watched: c.watch.paths(asked)}
	c.mu.Lock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxCachedPolicies {
		for k := range c.entries { // one out, whichever: a full cache holds policies of many inputs
			delete(c.entries, k)
			break
		}
	}
	c.entries[key] = kept
	c.mu.Unlock()
	return p, nil
}

// stillSame reports whether every question k's compilation asked gets the same answer now: its
// lstat and readlink questions are not asked while the watcher saw nothing they depend on change
// since a full check, which is made otherwise.
func (c *Cache) stillSame(k *cachedPolicy, lookup func(string) (string, bool)) bool {
	unchanged, from, mounts := c.watch.look(&k.watched)
	if unchanged {
		if !k.asked.sameAnswers(lookup, true) {
			return false
		}
		c.watchedReuse.Add(1)
		return true
	}
	if takeHook != nil {
		takeHook(false)
	}
	taken := c.watch.take(&k.watched, from, mounts) // after from was read, before the questions are asked
	if takeHook != nil {
		takeHook(true)
	}
	same := k.asked.sameAnswers(lookup, false)
	c.watch.validate(&k.watched, same, taken, from, mounts)
	return same
}

// forget drops the kept policy of key if it is still old.
func (c *Cache) forget(key cacheKey, old *cachedPolicy) {
	c.mu.Lock()
	if c.entries[key] == old {
		delete(c.entries, key)
	}
	c.mu.Unlock()
}

// takeHook, set by tests only, runs just before and just after a full check takes its watches.
var takeHook func(after bool)

// Reused returns how many calls used a kept policy.
func (c *Cache) Reused() int64 { return c.reused.Load() }

// Watched returns how many of those were spared the policy's lstat and readlink questions (see
// watcher).
func (c *Cache) Watched() int64 { return c.watchedReuse.Load() }

// keyOf returns in's key.
func keyOf(in Input) cacheKey {
	return cacheKey{bundle: in.Bundle, tool: in.Tool, binary: in.Binary, workspace: in.Workspace, home: in.Home,
		path: in.PATH, budget: in.DenyBudget, lookup: in.LookupEnv != nil,
		protect: strings.Join(in.Protect, "\x00"), protects: len(in.Protect),
		extraDeny: strings.Join(in.ExtraDeny, "\x00"), extraDenies: len(in.ExtraDeny)}
}

// forCall returns a copy of p with the state of the file system now (see takeState).
func (p *Policy) forCall() *Policy {
	q := p.clone()
	q.takeState()
	return q
}

// clone returns a copy of p with lists of its own.
func (p *Policy) clone() *Policy {
	q := *p
	q.Rules, q.Runtime = slices.Clone(p.Rules), slices.Clone(p.Runtime)
	q.Deny, q.Protect, q.Exec, q.Writable = slices.Clone(p.Deny), slices.Clone(p.Protect), slices.Clone(p.Exec), slices.Clone(p.Writable)
	q.gitGlobal, q.Egress, q.Ingress = slices.Clone(p.gitGlobal), slices.Clone(p.Egress), slices.Clone(p.Ingress)
	q.Env, q.Notes = slices.Clone(p.Env), slices.Clone(p.Notes)
	q.git = nil
	return &q
}
