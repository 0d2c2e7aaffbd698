package doctor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
)

// systemdRunning is the directory that exists when systemd is the init.
const systemdRunning = "/run/systemd/system"

// unit is what doctor reads from a clihostd.service file.
type unit struct {
	path       string
	user       string
	group      string
	binary     string
	flags      map[string][]string // ExecStart's --flag values
	readWrites []string
}

// unitChecks find the installed unit and check it: its binary and helper, its user and group,
// the folders its flags name, and whether systemd has it running.
func unitChecks(ctx context.Context, o Options) []Check {
	paths := o.UnitPaths
	if paths == nil {
		paths = DefaultUnitPaths
	}
	var u *unit
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			u = parseUnit(p, string(data))
			break
		}
	}
	if u == nil {
		return []Check{{Name: "systemd unit", Status: OK, Message: "no clihostd.service installed (looked in " + strings.Join(paths, ", ") + ")"}}
	}
	out := []Check{{Name: "systemd unit", Status: OK, Message: u.path}}
	add := func(c Check) { out = append(out, c) }
	if st, err := os.Stat(u.binary); err != nil || st.Mode()&0o111 == 0 {
		add(Check{Name: "systemd unit", Status: Fail, Message: fmt.Sprintf("ExecStart runs %s, which is not an executable file", u.binary),
			Fix: "install clihostd there (install -m 755 clihostd " + u.binary + ") or fix ExecStart in " + u.path})
	} else if dir := filepath.Dir(u.binary); dir != o.BinDir {
		if c := helperCheck(dir); c.Status != OK {
			add(c)
		}
	}
	if u.user != "" && !exists(user.Lookup, u.user) {
		add(Check{Name: "systemd unit", Status: Fail, Message: fmt.Sprintf("User=%s does not exist", u.user),
			Fix: "useradd --system --user-group --home-dir /var/lib/clihost --shell /usr/sbin/nologin " + u.user})
	}
	for _, g := range append([]string{u.group}, u.flags["--group"]...) {
		if g != "" && !exists(user.LookupGroup, g) {
			add(Check{Name: "systemd unit", Status: Fail, Message: fmt.Sprintf("group %s (Group= or --group) does not exist", g), Fix: "groupadd --system " + g})
		}
	}
	for _, b := range u.flags["--bundles"] {
		if !isDir(b) {
			add(Check{Name: "systemd unit", Status: Warn, Message: fmt.Sprintf("--bundles %s does not exist: the daemon serves the rest without it", b),
				Fix: "mkdir -p " + b + " and put bundle folders there"})
		}
	}
	seen := map[string]bool{}
	for _, w := range append(u.flags["--workspace"], u.readWrites...) {
		if !seen[w] && !isDir(w) {
			seen[w] = true
			add(Check{Name: "systemd unit", Status: Fail, Message: fmt.Sprintf("%s (--workspace or ReadWritePaths=) does not exist: the daemon cannot start or calls fail", w),
				Fix: fmt.Sprintf("mkdir -p %s && chown %s %s", w, or(u.user, "root"), w)})
		}
	}
	add(activeCheck(ctx, o))
	return out
}

// activeCheck asks systemd whether clihostd runs, when systemd is the init.
func activeCheck(ctx context.Context, o Options) Check {
	run := o.Systemctl
	if run == nil {
		if !isDir(systemdRunning) {
			return Check{Name: "systemd unit", Status: OK, Message: "systemd is not running here: not asked whether clihostd is active"}
		}
		run = systemctl
	}
	out, err := run(ctx, "is-active", "clihostd")
	if err == nil && out == "active" {
		return Check{Name: "systemd unit", Status: OK, Message: "clihostd.service is active"}
	}
	return Check{Name: "systemd unit", Status: Fail, Message: "clihostd.service is " + or(out, "not active"),
		Fix: "systemctl enable --now clihostd; journalctl -u clihostd -e says why it stopped"}
}

// systemctl runs the real systemctl.
func systemctl(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "systemctl", args...).Output()
	return strings.TrimSpace(string(out)), err
}

// parseUnit reads the settings doctor checks from a unit file: User=, Group=, ReadWritePaths= and
// ExecStart='s binary and --flag VALUE (or --flag=VALUE) pairs. Later settings override earlier ones,
// as in systemd; ExecStart's words are split on spaces (the shipped unit quotes nothing).
func parseUnit(path, text string) *unit {
	u := &unit{path: path, flags: map[string][]string{}}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "User":
			u.user = v
		case "Group":
			u.group = v
		case "ReadWritePaths":
			u.readWrites = append(u.readWrites, strings.Fields(v)...)
		case "ExecStart":
			u.binary, u.flags = parseExecStart(v)
		}
	}
	return u
}

// parseExecStart splits an ExecStart= value into the binary and its --flag values.
func parseExecStart(v string) (string, map[string][]string) {
	words := strings.Fields(strings.TrimLeft(v, "@-:+!"))
	flags := map[string][]string{}
	if len(words) == 0 {
		return "", flags
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			continue
		}
		name := "--" + strings.TrimLeft(w, "-")
		if k, val, ok := strings.Cut(name, "="); ok {
			flags[k] = append(flags[k], val)
			continue
		}
		if i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
			flags[name] = append(flags[name], words[i+1])
			i++
		}
	}
	return words[0], flags
}

// exists reports whether lookup finds name.
func exists[T any](lookup func(string) (T, error), name string) bool {
	_, err := lookup(name)
	return err == nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
