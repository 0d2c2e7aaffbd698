package doctor

import (
	"debug/buildinfo"
	"fmt"
	"runtime/debug"
)

// sameBuild compares the build of the executable at path with this program's: the module
// version, and the VCS revision and modified flag when both were built from a checkout. It returns
// "" when they match, else what differs.
func sameBuild(path string) string {
	mine, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	theirs, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("%s: cannot read its build information: %v", path, err)
	}
	a, b := buildStamp(mine), buildStamp(theirs)
	if a != b {
		return fmt.Sprintf("%s is another build (%s) than clihostctl (%s)", path, b, a)
	}
	return ""
}

// buildStamp names a build: module version, revision, and "+modified" for a dirty checkout.
func buildStamp(bi *debug.BuildInfo) string {
	s := bi.Main.Version
	for _, kv := range bi.Settings {
		switch {
		case kv.Key == "vcs.revision":
			s += " " + kv.Value
		case kv.Key == "vcs.modified" && kv.Value == "true":
			s += "+modified"
		}
	}
	return s
}
