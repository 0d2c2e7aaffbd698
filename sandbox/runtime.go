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
//   - /etc/ssl/openssl.cnf, /etc/pki/tls/openssl.cnf and /etc/crypto-policies/back-ends (subtree,
//     Fedora's openssl.cnf includes it): OpenSSL's configuration. Node loads it at startup and exits
//     13 ("OpenSSL configuration error") when it exists but cannot be read; /usr/lib/ssl's
//     openssl.cnf is a link to the Debian one. The file only: /etc/ssl/private stays out.
//   - /etc/host.conf, /etc/gai.conf, /etc/services, /etc/protocols: the resolver's and
//     getaddrinfo's configuration and the service and protocol names (glibc, Node's dns).
//   - /etc/os-release and /usr/share/icu (subtree): the distribution's name (CLIs report it in
//     their user agent) and ICU's data for a Node built against the system's ICU.
//
// Left out on purpose: /etc/resolv.conf and /etc/hosts (the init writes its own, pointing at the
// in-namespace DNS stub), /dev, /proc and /tmp (the init mounts fresh ones), /etc/machine-id (an
// identifier of the host), and the binary's directory (only the binary file itself is granted,
// through Policy.Exec).
var runtimeCandidates = []string{
	"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache",
	"/etc/ssl/certs", "/etc/ca-certificates", "/usr/share/ca-certificates",
	"/etc/pki/tls/certs", "/etc/pki/ca-trust/extracted",
	"/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
	"/usr/share/zoneinfo", "/etc/localtime",
	"/etc/ssl/openssl.cnf", "/etc/pki/tls/openssl.cnf", "/etc/crypto-policies/back-ends",
	"/etc/host.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
	"/etc/os-release", "/usr/share/icu",
}

// runtimeSet resolves runtimeCandidates and the binary's npm package tree (see packageTree: the
// package's own files and the dependencies npm hoisted beside it, which a Node CLI reads as it
// starts; never written, and executable only where Exec says so), through v, into read-only rules
// (directories as subtrees), sorted, without duplicates and without rules a subtree rule already
// covers.
func runtimeSet(v *view, bin string) ([]PathRule, error) {
	var rules []PathRule
	candidates := runtimeCandidates
	if tree := packageTree(bin); tree != "" {
		candidates = append(slices.Clip(candidates), tree)
	}
	for _, p := range candidates {
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
