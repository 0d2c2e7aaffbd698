package doctor

import (
	"os"
	"strings"
)

// procMountinfo is where the host's mounts are read from (as clihostctl sees them: the /proc every
// local user sees).
const procMountinfo = "/proc/self/mountinfo"

// hidepidFix says how to hide other users' processes.
const hidepidFix = "mount /proc with hidepid=invisible (or hidepid=2): mount -o remount,hidepid=invisible /proc, and in /etc/fstab: " +
	"proc /proc proc defaults,hidepid=invisible 0 0 (add gid=GROUP for monitoring tools that must see every process; see docs/operations.md)"

// hidepidCheck reports whether /proc hides other users' processes (hidepid): without it every
// local user reads each CLI's command line and the names of the files it holds open
// (/proc/PID/cmdline, ps -eo args), including a secret a bundle puts in argv.
func hidepidCheck() Check {
	data, err := os.ReadFile(procMountinfo)
	if err != nil {
		return Check{Name: "proc hidepid", Status: Warn, Message: "cannot read " + procMountinfo + ": " + err.Error(), Fix: hidepidFix}
	}
	return hidepidFromMountinfo(string(data))
}

// hidepidFromMountinfo is hidepidCheck on the text of a mountinfo file: the last proc mount on
// /proc decides (a later mount hides an earlier one).
func hidepidFromMountinfo(mountinfo string) Check {
	found, mode := false, ""
	for line := range strings.Lines(mountinfo) {
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || fields[4] != "/proc" || len(after) < 3 || after[0] != "proc" {
			continue
		}
		found, mode = true, "off"
		for _, opt := range strings.Split(after[2], ",") {
			if v, ok := strings.CutPrefix(opt, "hidepid="); ok {
				mode = v
			}
		}
	}
	switch {
	case !found:
		return Check{Name: "proc hidepid", Status: Warn, Message: "no proc file system is mounted on /proc here: cannot tell whether other users see the CLIs' processes", Fix: hidepidFix}
	case mode == "2" || mode == "invisible" || mode == "1" || mode == "noaccess" || mode == "4" || mode == "ptraceable":
		return Check{Name: "proc hidepid", Status: OK, Message: "/proc is mounted with hidepid=" + mode + ": other users cannot read the CLIs' command lines or environment"}
	}
	return Check{Name: "proc hidepid", Status: Warn,
		Message: "/proc is mounted without hidepid (hidepid=" + mode + "): every local user reads each CLI's command line while it runs (ps -eo args), including a secret a bundle puts in argv",
		Fix:     hidepidFix}
}
