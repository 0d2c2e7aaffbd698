package nsinit

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/egress/addr"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockPresets are go-landlock's configurations from minLandlockABI up, each handling every
// access right of its ABI.
var landlockPresets = []landlock.Config{
	landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

// Access rights granted by the sandbox. The sets are intersected with what the configuration
// handles before use (e.g. IoctlDev exists from ABI v5 on).
const (
	// accessFileOnly are the rights that apply to files; a rule on a file may hold no others.
	accessFileOnly landlock.AccessFSSet = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev
	accessRead landlock.AccessFSSet = ll.AccessFSReadFile | ll.AccessFSReadDir
	// accessReadWrite is reading plus creating, writing, truncating, removing and renaming (REFER:
	// tools such as git rename files between directories). Not IoctlDev, not ResolveUnix.
	accessReadWrite landlock.AccessFSSet = accessRead | ll.AccessFSWriteFile | ll.AccessFSTruncate |
		ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
		ll.AccessFSMakeSym | ll.AccessFSRefer
	accessExec     landlock.AccessFSSet = ll.AccessFSReadFile | ll.AccessFSExecute
	accessDevRW    landlock.AccessFSSet = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	accessTerminal landlock.AccessFSSet = accessDevRW | ll.AccessFSIoctlDev | ll.AccessFSReadDir
)

// maxLandlockRules bounds the rules one sandbox may need after splitting allow rules around deny
// paths; a plan that needs more is refused rather than enforced loosely.
const maxLandlockRules = 10000

// sandboxGrants are the grants every sandboxed program gets on what the init built for it.
var sandboxGrants = map[string]landlock.AccessFSSet{
	"/proc":        accessRead,
	"/dev":         ll.AccessFSReadDir,
	"/dev/null":    accessDevRW,
	"/dev/zero":    accessDevRW,
	"/dev/full":    accessDevRW,
	"/dev/random":  ll.AccessFSReadFile,
	"/dev/urandom": ll.AccessFSReadFile,
	"/dev/tty":     accessTerminal,
	"/dev/ptmx":    accessTerminal,
	"/dev/pts":     accessTerminal,
	"/dev/shm":     accessReadWrite,
	"/tmp":         accessReadWrite,
}

// netMode is what Landlock does about the network.
type netMode int

const (
	// netUnrestricted handles no network right (the network namespace alone confines).
	netUnrestricted netMode = iota
	// netDenied handles every network right the ABI has (TCP from v4, UDP from v10) and grants
	// none. Below v4 it handles nothing (Plan.NoNetwork is documented as v4+).
	netDenied
	// netEgress handles every network right and grants only TCP connect to egressConnectPorts
	// (and, where UDP is handled, sending to port 53 from an automatically bound port). It
	// needs ABI v4: below, the configuration is refused.
	netEgress
)

// minEgressABI is the first Landlock ABI that restricts TCP connect.
const minEgressABI = 4

// landlockConfig returns the strictest configuration this kernel supports (at least minLandlockABI),
// handling network rights as mode says.
func landlockConfig(mode netMode) (landlock.Config, error) {
	v, err := landlockABI()
	if err != nil {
		return landlock.Config{}, err
	}
	cfg := landlockPresets[v-minLandlockABI]
	switch mode {
	case netUnrestricted:
		cfg.HandledAccessNet = 0
	case netEgress:
		if v < minEgressABI || cfg.HandledAccessNet&ll.AccessNetConnectTCP == 0 {
			return landlock.Config{}, fmt.Errorf("ABI v%d cannot restrict TCP connect (v%d needed): egress cannot be confined to the proxy ports", v, minEgressABI)
		}
	}
	return cfg, nil
}

// portRule is a Landlock network rule: the rights access on one port.
type portRule struct {
	access landlock.AccessNetSet
	port   uint16
}

// netRules returns the network rules of mode for cfg, with the plan's ingress ports bindable (and
// connectable: the init dials them for the host).
func netRules(cfg landlock.Config, mode netMode, ingress []int) []portRule {
	var rules []portRule
	if mode != netUnrestricted {
		for _, p := range ingress {
			rules = append(rules, portRule{ll.AccessNetBindTCP, uint16(p)}, portRule{ll.AccessNetConnectTCP, uint16(p)})
		}
	}
	if mode != netEgress {
		return rules
	}
	for _, p := range egressConnectPorts() {
		rules = append(rules, portRule{ll.AccessNetConnectTCP, uint16(p)})
	}
	if cfg.HandledAccessNet&ll.AccessNetConnectSendUDP != 0 {
		rules = append(rules, portRule{ll.AccessNetConnectSendUDP, addr.DNSPort})
	}
	if cfg.HandledAccessNet&ll.AccessNetBindUDP != 0 {
		rules = append(rules, portRule{ll.AccessNetBindUDP, 0}) // the autobind of a client socket
	}
	return rules
}

// egressGrants are the extra grants of an Egress sandbox: the files the init generated.
var egressGrants = map[string]landlock.AccessFSSet{
	"/etc/resolv.conf": ll.AccessFSReadFile,
	"/etc/hosts":       ll.AccessFSReadFile,
}

// privateDirs are the sandbox's own writable directories: fresh tmpfs mounts, never the host's.
// They are granted whole, whatever the deny list holds: a deny path under /tmp names a host file,
// which is either hidden by the private /tmp or lies in a host tree bound there, where its mask
// covers it (splitting /tmp around it would leave /tmp itself without the right to create files).
var privateDirs = []string{"/tmp", "/dev/shm"}

// ownView prefixes the pathTable keys of the sandbox's own paths (sandboxGrants, egressGrants),
// resolved in the sandbox's view, to keep them apart from the plan's paths, resolved in the host's
// view before the mounts (the host's /tmp is not the sandbox's).
const ownView = "\x00sandbox"

// grants computes the Landlock rights of p in the sandbox, as rights by pathTable key: ReadOnly
// (read), ReadWrite (read and write) and Exec (read and execute; the only place EXECUTE is granted),
// plus the sandbox's own paths (sandboxGrants, and egressGrants with Egress) unless the plan binds a
// host path over one, plus listing the empty directory and reading the empty file that mask deny
// paths (see maskDenied). Everything else is split around the Deny paths, so that no deny path and
// nothing beneath one gets any right. Every right is granted on a descriptor in paths: the plan's
// as openPlan resolved them, the split directories' entries opened beneath them, the sandbox's own
// opened here.
//
// Host trees the plan binds under the sandbox's /tmp inherit its read-write grant (Landlock cannot
// exclude a subtree without also taking the rights away from /tmp itself); the read-only ones are
// kept read-only by their read-only mount, and the deny paths inside them by their masks.
func grants(p isolation.Plan, paths *pathTable) (map[string]landlock.AccessFSSet, error) {
	planPaths := slices.Concat(p.ReadOnly, p.ReadWrite, p.Exec)
	own := maps.Clone(sandboxGrants)
	if p.Egress {
		maps.Copy(own, egressGrants)
	}
	out := map[string]landlock.AccessFSSet{}
	for _, path := range slices.Sorted(maps.Keys(own)) {
		if slices.Contains(planPaths, path) {
			continue // e.g. the host's /tmp bound over the sandbox's: the plan says what it gets
		}
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0) // built by the init itself
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		if err := paths.add(ownView+path, fd); err != nil {
			return nil, err
		}
		exclude := p.Deny
		if slices.Contains(privateDirs, path) {
			exclude = nil
		}
		if err := splitGrant(out, paths, ownView, path, own[path], exclude); err != nil {
			return nil, err
		}
	}
	if _, ok := paths.fd(maskDirKey); ok {
		out[maskDirKey] |= ll.AccessFSReadDir
	}
	if _, ok := paths.fd(maskFileKey); ok {
		out[maskFileKey] |= ll.AccessFSReadFile
	}
	roots := map[string]landlock.AccessFSSet{}
	for _, path := range p.ReadOnly {
		roots[path] |= accessRead
	}
	for _, path := range p.ReadWrite {
		roots[path] |= accessReadWrite
	}
	for _, path := range p.Exec {
		roots[path] |= accessExec
	}
	for _, root := range slices.Sorted(maps.Keys(roots)) {
		exclude := p.Deny
		if slices.Contains(p.ReadWrite, root) {
			// A writable root is never split: splitting leaves its directories without the right
			// to create entries, which breaks every CLI that writes a new file next to a denied
			// one (git next to .git/hooks). The deny paths inside it are masked and pinned by the
			// init instead (see pinAncestors); only the denies around the root apply here.
			exclude = denyOutside(p.Deny, root)
		}
		if err := splitGrant(out, paths, "", root, roots[root], exclude); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// denyOutside returns the deny paths that do not lie strictly beneath root.
func denyOutside(deny []string, root string) []string {
	var out []string
	for _, d := range deny {
		if d == root || !within(d, root) {
			out = append(out, d)
		}
	}
	return out
}

// unreachable reports whether err says a file cannot be looked at at all: a FUSE mount whose
// server is gone (ENOTCONN), a stale NFS handle, an I/O error, or a FUSE mount of another user's
// without allow_other (EACCES even for root). A split grant leaves such an entry without a rule
// (closed) rather than failing the whole sandbox over a mount nobody could read anyway.
func unreachable(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ESTALE) || errors.Is(err, unix.EIO) || errors.Is(err, unix.EACCES)
}

// splitGrant adds the grant of access on path (pathTable key view+path) to out, unless path lies
// within an excluded path or was not resolved. When excluded paths lie beneath path, path itself
// only gets ReadDir (if access has it), and the grant goes instead to each of its entries,
// recursively, skipping the excluded paths and symbolic links (a rule on a link would land on its
// target; an unruled link is judged by where it leads). The entries are read through path's
// descriptor and opened beneath it without following symbolic links, never by name from /. So a
// split directory cannot get new entries nor lose or rename its entries (which keeps a deny path
// from being moved away or re-created), and whatever appears in it later has no rights.
func splitGrant(out map[string]landlock.AccessFSSet, paths *pathTable, view, path string, access landlock.AccessFSSet, exclude []string) error {
	if _, excluded := coveringPath(path, exclude); excluded {
		return nil
	}
	fd, ok := paths.fd(view + path)
	if !ok {
		return nil // did not exist when the init resolved it
	}
	var inner []string
	for _, d := range exclude {
		if within(d, path) {
			inner = append(inner, d)
		}
	}
	if len(inner) == 0 {
		out[view+path] |= access
	} else {
		names, err := readDirNames(fd)
		if err != nil {
			return fmt.Errorf("split %s around %v: %w", path, inner, err)
		}
		if paths.keepSplit {
			kept, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("split %s: %w", path, err)
			}
			paths.split = append(paths.split, splitDir{key: view + path, fd: kept, st: paths.st[view+path], names: names})
		}
		if a := access & ll.AccessFSReadDir; a != 0 {
			out[view+path] |= a
		}
		for _, name := range names {
			child := filepath.Join(path, name)
			cfd, err := openBeneath(fd, name)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
				continue // gone, or a symbolic link
			}
			if err != nil {
				return fmt.Errorf("split %s: open %s: %w", path, child, err)
			}
			if err := paths.add(view+child, cfd); err != nil {
				if unreachable(err) {
					continue // no rule: it stays out of reach, as the file system already is
				}
				return err
			}
			if paths.st[view+child].Mode&unix.S_IFMT == unix.S_IFLNK {
				continue
			}
			if err := splitGrant(out, paths, view, child, access, inner); err != nil {
				return err
			}
		}
	}
	if len(out) > maxLandlockRules {
		return fmt.Errorf("more than %d rules are needed to split the allowed paths around %v", maxLandlockRules, exclude)
	}
	return nil
}

// readDirNames lists the directory at the O_PATH descriptor fd.
func readDirNames(fd int) ([]string, error) {
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dfd), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}

// pathRule is a Landlock filesystem rule on the descriptor of a pathTable key.
type pathRule struct {
	key  string
	attr ll.PathBeneathAttr
}

// landlockRules turns grants (rights by pathTable key) into rules for cfg, sorted by key: rights cfg
// does not handle are dropped and rules on non-directories keep only file rights. Each rule is on
// the descriptor in paths itself: the file openPlan (or grants) resolved, whatever its name leads
// to now.
func landlockRules(cfg landlock.Config, g map[string]landlock.AccessFSSet, paths *pathTable) ([]pathRule, error) {
	rules := make([]pathRule, 0, len(g))
	for _, key := range slices.Sorted(maps.Keys(g)) {
		fd, ok := paths.fd(key)
		if !ok {
			return nil, fmt.Errorf("no descriptor for %s", key)
		}
		a := g[key] & cfg.HandledAccessFS
		if !paths.isDir(key) {
			a &= accessFileOnly
		}
		if a != 0 {
			rules = append(rules, pathRule{key, ll.PathBeneathAttr{AllowedAccess: uint64(a), ParentFd: fd}})
		}
	}
	return rules, nil
}

// enforceLandlock builds the ruleset of cfg with rules and ports and enforces it on the calling
// thread alone (landlock_restrict_self without TSYNC), which must have no_new_privs set. A fork
// copies the thread's domain: the program starts in it.
func enforceLandlock(cfg landlock.Config, rules []pathRule, ports []portRule) error {
	attr := ll.RulesetAttr{
		HandledAccessFS:  uint64(cfg.HandledAccessFS),
		HandledAccessNet: uint64(cfg.HandledAccessNet),
		Scoped:           uint64(cfg.Scoped),
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("create the ruleset (%v): %w", cfg, err)
	}
	defer unix.Close(fd)
	for i := range rules {
		if err := ll.LandlockAddPathBeneathRule(fd, &rules[i].attr, 0); err != nil {
			return fmt.Errorf("rule on %s (%v): %w", strings.TrimPrefix(rules[i].key, "\x00"), landlock.AccessFSSet(rules[i].attr.AllowedAccess), err)
		}
	}
	for _, r := range ports {
		if err := ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: uint64(r.access), Port: uint64(r.port)}, 0); err != nil {
			return fmt.Errorf("rule on port %d (%v): %w", r.port, r.access, err)
		}
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("restrict: %w", err)
	}
	return nil
}
