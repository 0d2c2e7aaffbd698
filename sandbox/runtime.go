package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// runtimeCandidates is the read-only baseline a dynamically linked CLI needs to start and to make
// TLS connections, granted on top of the manifest's fs.read. Each is included when it exists on
// the host, with its symlinks resolved (/lib and /lib64 are usually links into /usr):
//
//   - /lib, /lib64, /usr/lib, /usr/lib64, /usr/local/lib (subtrees) and /etc/ld.so.cache: the ELF
//     interpreter and the shared libraries it loads (glibc's default search path, the
//     /usr/local/lib entry Debian's ld.so.conf adds, and the cache ld.so consults first); also
//     where glibc's locale archive and gconv modules live.
//   - /etc/ssl/certs, /etc/ca-certificates, /usr/share/ca-certificates, /etc/pki/tls/certs,
//     /etc/pki/ca-trust/extracted (subtrees): the system CA bundle on Debian and Fedora, which
//     /etc/ssl/certs' links point into. Never /etc/ssl or /etc/pki whole: private keys live there.
//   - /etc/nsswitch.conf, /etc/passwd, /etc/group: user and group lookups (getpwuid for ~, git's
//     and ssh's identity); they hold no secrets (/etc/shadow is not listed).
//   - /usr/share/zoneinfo (subtree) and /etc/localtime: time zones.
//
// Left out on purpose: /etc/resolv.conf and /etc/hosts (the init writes its own, pointing at the
// in-namespace DNS stub), /dev, /proc and /tmp (the init mounts fresh ones), and the binary's
// directory (only the binary file itself is granted, through Policy.Exec).
var runtimeCandidates = []string{
	"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache",
	"/etc/ssl/certs", "/etc/ca-certificates", "/usr/share/ca-certificates",
	"/etc/pki/tls/certs", "/etc/pki/ca-trust/extracted",
	"/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
	"/usr/share/zoneinfo", "/etc/localtime",
}

// runtimeSet resolves runtimeCandidates, through v, into read-only rules (directories as subtrees), sorted,
// without duplicates and without rules a subtree rule already covers.
func runtimeSet(v *view) ([]PathRule, error) {
	var rules []PathRule
	for _, p := range runtimeCandidates {
		r, err := v.evalSymlinks(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("runtime path: %w", err)
		}
		st, err := v.lstat(r)
		if err != nil {
			return nil, fmt.Errorf("runtime path: %w", err)
		}
		rules = append(rules, PathRule{Path: r, Access: Read, Subtree: st.IsDir()})
	}
	slices.SortFunc(rules, comparePathRule)
	rules = slices.Compact(rules)
	var out []PathRule
	for _, r := range rules {
		covered := slices.ContainsFunc(rules, func(o PathRule) bool {
			return o.Subtree && o.Path != r.Path && within(r.Path, o.Path)
		})
		if !covered {
			out = append(out, r)
		}
	}
	return out, nil
}
