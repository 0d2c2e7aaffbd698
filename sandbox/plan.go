package sandbox

import (
	"os"
	"slices"

	"github.com/clihost/clihost/isolation"
)

// Identity is who a sandboxed program runs as when the host is root. (A host that is not root runs
// programs as itself, inside a user namespace, without capabilities.)
type Identity struct {
	UID, GID int
	Groups   []int // supplementary groups
}

// Plan turns the policy into the path lists and switches of the sandbox's init (isolation.Plan); the
// caller fills in the program (Path, Args, Dir, Env). The mapping:
//
//   - Runtime and read-only Rules → ReadOnly; Writable → ReadWrite (roots that exist; the notes name
//     the others); Exec → Exec; Deny → Deny; Protect → Protect; Absent → Absent (so that the init
//     refuses a deny path removed since Compile).
//   - A Rule on a directory without Subtree (a literal pattern naming a directory) would mean "this
//     directory, listing only"; the init grants directories as whole trees, so such a rule is left
//     out: narrower than declared, never wider (a note says so).
//   - No Egress → NoNetwork: every TCP bind and connect is denied by Landlock on top of the empty
//     network namespace.
//   - Ingress URLs → their loopback ports (the host forwards them, nsinit Cmd.ServeIngress).
//   - Seccomp and the no-exec memfd setting are always on.
//
// The notes say what was left out and why.
func (p *Policy) Plan(id Identity) (isolation.Plan, []string) {
	plan := isolation.Plan{
		UID: id.UID, GID: id.GID, Groups: slices.Clone(id.Groups),
		Exec:        slices.Clone(p.Exec),
		Deny:        slices.Clone(p.Deny),
		Protect:     slices.Clone(p.Protect),
		Absent:      slices.Clone(p.Absent),
		NoNetwork:   len(p.Egress) == 0,
		Seccomp:     true,
		NoExecMemfd: true,
	}
	var notes []string
	for _, u := range p.Ingress {
		if port, err := IngressPort(u); err == nil { // Compile checked them
			plan.Ingress = append(plan.Ingress, port)
		}
	}
	for _, w := range p.Writable {
		if _, err := os.Lstat(w); err != nil {
			// Landlock grants inodes and a bind needs a source: a root that does not exist yet
			// (~/.cache/x before the first run) cannot be granted. Creating it here would leave
			// a host-visible artifact the manifest did not ask for.
			notes = append(notes, "fs.write: "+w+" does not exist: not writable in this call")
			continue
		}
		plan.ReadWrite = append(plan.ReadWrite, w)
	}
	for _, r := range slices.Concat(p.Runtime, p.Rules) {
		switch {
		case r.Access&Exec != 0:
			continue // in Exec already
		case r.Access&Write != 0:
			if !slices.Contains(plan.ReadWrite, r.Path) {
				// A writable rule outside the writable roots (cannot happen from Compile): read only.
				plan.ReadOnly = append(plan.ReadOnly, r.Path)
			}
		case !r.Subtree && isDir(r.Path):
			notes = append(notes, "fs: "+r.Path+" names a directory without /**: not granted (use "+r.Path+"/** for its contents)")
		default:
			plan.ReadOnly = append(plan.ReadOnly, r.Path)
		}
	}
	return plan, notes
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
