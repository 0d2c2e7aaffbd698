// Package buildinfo says which build of clihost is running: the module version when it was
// installed as a module (go install …@v1.2.3), else the VCS revision the go command stamped into
// the binary (vcs.revision, vcs.modified, vcs.time), else "dev". Both binaries print it for
// --version, and clihostd reports it in its status.
package buildinfo

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Info is one binary's build.
type Info struct {
	Version   string    `json:"version"`            // the module version, the -X main.version given, or "dev"
	Revision  string    `json:"revision,omitempty"` // the VCS revision (full hash)
	Modified  bool      `json:"modified,omitempty"` // the work tree had uncommitted changes
	Time      time.Time `json:"time,omitzero"`      // the revision's commit time
	GoVersion string    `json:"go"`                 // the Go toolchain
	Platform  string    `json:"platform"`           // GOOS/GOARCH
}

// Read returns this binary's build; version is what -ldflags "-X main.version=…" set ("dev" when
// nothing did), used unless the module itself has a version.
func Read(version string) Info {
	info := Info{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	return fromBuildInfo(info, bi)
}

// fromBuildInfo fills info from bi.
func fromBuildInfo(info Info, bi *debug.BuildInfo) Info {
	if v := bi.Main.Version; released(v) && (info.Version == "" || info.Version == "dev") {
		info.Version = v
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				info.Time = t
			}
		}
	}
	return info
}

// pseudo matches a pseudo-version's tail (v0.0.0-20261126073647-adccb35b125f) and a modified
// checkout's +dirty: versions the go command derives from a checkout, which the revision says
// better.
var pseudo = regexp.MustCompile(`(\d{14}-[0-9a-f]{12}|\+dirty)$`)

// released reports whether v is a module version someone released: a tag, not a checkout's
// pseudo-version.
func released(v string) bool { return v != "" && v != "(devel)" && !pseudo.MatchString(v) }

// Short is the version and, when known, the revision: "dev (a1b2c3d4e5f6, modified)" (for
// status lines and MCP's server info).
func (i Info) Short() string {
	if i.Revision == "" {
		return i.Version
	}
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += ", modified"
	}
	return i.Version + " (" + rev + ")"
}

// String is the one line --version prints after the program's name, e.g.
// "dev (a1b2c3d4e5f6, modified) built 2026-11-26T07:00:00Z go1.26.8 linux/amd64".
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Short())
	if !i.Time.IsZero() {
		b.WriteString(" built " + i.Time.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, " %s %s", i.GoVersion, i.Platform)
	return b.String()
}
