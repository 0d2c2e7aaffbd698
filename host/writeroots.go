package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox"
)

// homeWriteRoots are the folders in the home that b's (and tool's) effective fs.write declares as
// subtrees (`~/.gemini/**`), as paths relative to the home: the config folders a CLI writes, which
// the sandbox can only grant once they exist. Literal patterns are left out (a file or a folder?),
// and so are wildcards and patterns outside ~.
func homeWriteRoots(b *manifest.Bundle, tool *manifest.ToolEntry) []string {
	return writeRoots(b, tool, "~/")
}

// workspaceWriteRoots are the folders in the workspace that b's (and tool's) effective fs.write
// declares as subtrees (`./out/**`), relative to the workspace, as homeWriteRoots.
func workspaceWriteRoots(b *manifest.Bundle, tool *manifest.ToolEntry) []string {
	return writeRoots(b, tool, "./")
}

// writeRoots are the subtree patterns of the effective fs.write under prefix (~/ or ./), as clean
// relative paths; the prefix's own root (./**) is not among them.
func writeRoots(b *manifest.Bundle, tool *manifest.ToolEntry, prefix string) []string {
	var toolSandbox *manifest.Sandbox
	if tool != nil {
		toolSandbox = tool.Tool.Sandbox
	}
	eff := manifest.EffectiveSandbox(b.CLI.Sandbox, toolSandbox)
	if eff.FS == nil {
		return nil
	}
	var out []string
	for _, p := range eff.FS.Write {
		kind, err := manifest.ClassifyPattern(p)
		if err != nil || kind != manifest.PatternSubtree || !strings.HasPrefix(p, prefix) {
			continue
		}
		rel := filepath.Clean(strings.TrimSuffix(strings.TrimSuffix(p[len(prefix):], "/"), "**"))
		if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			continue
		}
		out = append(out, rel)
	}
	return out
}

// makeWriteRoots creates the folders rels (relative, clean) inside home when they do not exist yet,
// mode 0700 and owned by id, so that a CLI's declared config folder (~/.gemini) is writable on its
// first call instead of being dropped from the sandbox as a path that does not exist. The walk
// starts at home and never follows a symbolic link: a link the uid planted in its home
// (~/.gemini → /etc) ends the walk there, creating nothing, and the sandbox then judges the link as
// it judges any write root (resolved, and refused on a root host when the uid may not write where it
// leads). Only folders this call creates are given to id; existing ones are left as they are. A
// home that does not exist (/nonexistent) gets nothing.
func makeWriteRoots(home string, id sandbox.Identity, rels []string, asRoot bool) error {
	if len(rels) == 0 || home == noHome {
		return nil
	}
	for _, rel := range rels {
		if err := makeBeneath(home, rel, 0o700, id, asRoot); err != nil {
			return fmt.Errorf("the write root ~/%s: %w", rel, err)
		}
	}
	return nil
}

// makeWorkspaceRoots creates the folders rels (relative, clean) inside the workspace ws when they
// do not exist yet, so that a tool declaring fs.write ./out/** finds out/ there on its first call
// (the sandbox can only grant a folder that exists). The walk is makeWriteRoots's: from ws, never
// through a symbolic link (a planted out → /etc creates nothing) or over a file, and only the
// folders this call creates are given to id. They are 0770 in a workspace shared with its group
// (sharedUmask) and 0755 otherwise, as a folder the CLI made itself would be.
func makeWorkspaceRoots(ws string, id sandbox.Identity, rels []string, asRoot bool) error {
	mode := uint32(0o755)
	if sharedUmask(ws) != 0 {
		mode = 0o770
	}
	for _, rel := range rels {
		if err := makeBeneath(ws, rel, mode, id, asRoot); err != nil {
			return fmt.Errorf("the write folder ./%s: %w", rel, err)
		}
	}
	return nil
}

// makeBeneath walks rel's components from home without following symbolic links, creating the
// missing ones with mode (less the umask; see makeWriteRoots).
func makeBeneath(home, rel string, mode uint32, id sandbox.Identity, asRoot bool) error {
	fd, err := unix.Open(home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(fd, name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return err
			}
			created := err == nil
			next, err = unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == nil && created && asRoot {
				err = giveTo(next, id)
			}
		}
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil // a symbolic link or a file: not ours to replace (see makeWriteRoots)
		}
		if err != nil {
			return err
		}
		fd = next
	}
	unix.Close(fd)
	return nil
}

// giveTo hands the folder just created (fd) to id, through its own descriptor (a name swapped since
// is not followed), and only while it is still what the host made: owned by the host and empty. A
// folder the uid moved into the name meanwhile (another user's, from a place the uid may write) is
// left as it is.
func giveTo(fd int, id sandbox.Identity) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if int(st.Uid) != os.Geteuid() {
		return nil
	}
	if empty, err := emptyDir(fd); err != nil || !empty {
		return err
	}
	return unix.Fchownat(fd, "", id.UID, id.GID, unix.AT_EMPTY_PATH)
}

// emptyDir reports whether the folder open at fd holds nothing but . and .. (its link count says
// nothing on every file system: btrfs gives folders 1).
func emptyDir(fd int) (bool, error) {
	buf := make([]byte, 4096)
	n, err := unix.Getdents(fd, buf)
	if err != nil {
		return false, err
	}
	_, _, names := unix.ParseDirent(buf[:n], -1, nil) // without . and ..
	return len(names) == 0, nil
}
